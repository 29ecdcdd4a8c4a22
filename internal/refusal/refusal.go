// Package refusal is the error a domain package returns when it refuses a
// request for a reason the caller may read: a kind, which is the domain's
// sentinel (order.ErrConflict, activity.ErrConflict, ...) for errors.Is, and a
// message fit to show the caller, carried as data. The HTTP layer maps the
// kind to its code and shows the message as it is: nobody parses error text.
package refusal

import (
	"errors"
	"fmt"
)

// Error is a refusal: Kind says which, Message says why, for the caller.
type Error struct {
	Kind    error
	Message string
	// Field names the one request field at fault, by its name in the
	// request ("quantity", "device_id"), when one is; the HTTP layer shows
	// it as the error's field. Empty otherwise.
	Field string
}

// New returns a refusal of kind with a formatted message.
func New(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// OfField returns a refusal of kind, with a formatted message, of the one
// request field named field.
func OfField(kind error, field, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Field: field}
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Message }

// Unwrap makes a refusal match its kind.
func (e *Error) Unwrap() error { return e.Kind }

// Message returns the message of the first refusal in err's chain, or def
// when there is none.
func Message(err error, def string) string {
	var r *Error
	if errors.As(err, &r) {
		return r.Message
	}
	return def
}

// Field returns the field of the first refusal in err's chain: "" when
// there is none, or it names no field.
func Field(err error) string {
	var r *Error
	if errors.As(err, &r) {
		return r.Field
	}
	return ""
}
