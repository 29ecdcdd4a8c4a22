package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/httperr"
)

// memberFault finds why the JSON value raw does not decode into dst (a
// pointer to a struct of plain fields): it is not an object, or one of its
// members — the first, in the body's order — names no field of dst or has
// a value its field's type cannot hold. The error names that member as
// Field, with a message a person reads: "starts_at: must be a time in RFC
// 3339 form, e.g. 2026-12-01T10:00:00Z", not Go's "parsing time …". nil
// when it finds no fault.
//
// It decodes member by member, so the member at fault is known from where
// it is, not read back out of encoding/json's error text (whose unknown-
// field error is a bare string, and whose time errors name no member).
// Only a refused body pays for it: an accepted one is decoded once, by
// decodeJSON.
func memberFault(raw []byte, dst any) *httperr.Error {
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return httperr.New(httperr.InvalidArgument, "request body must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		f, ok := fieldNamed(t, name)
		if !ok {
			return fieldError(name, "is not a field of this request")
		}
		if err := json.Unmarshal(value, reflect.New(f.typ).Interface()); err != nil {
			return fieldError(f.name, mustBe(f.typ, value))
		}
	}
	return nil
}

// fieldError is INVALID_ARGUMENT of field, its message "<field>: <what>"
// as activity.FieldError's (the admin console shows what follows the
// prefix beside the field).
func fieldError(field, what string) *httperr.Error {
	return &httperr.Error{Code: httperr.InvalidArgument, Message: field + ": " + what, Field: field}
}

// member is a struct field as JSON sees it.
type member struct {
	name string // its JSON name
	typ  reflect.Type
}

// fieldNamed finds the field of struct t that encoding/json decodes the
// member name into: its JSON name exactly, else in another case (as
// encoding/json matches).
func fieldNamed(t reflect.Type, name string) (member, bool) {
	var folded member
	found := false
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		switch {
		case tag == name:
			return member{tag, f.Type}, true
		case !found && strings.EqualFold(tag, name):
			folded, found = member{tag, f.Type}, true
		}
	}
	return folded, found
}

// mustBe says what a value of type t is, for a value that is not one.
func mustBe(t reflect.Type, value json.RawMessage) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "must be a time in RFC 3339 form, e.g. 2026-12-01T10:00:00Z"
	}
	sent := jsonKind(value)
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if sent == "a number" { // a fraction, an exponent, or too large
			lo, hi := int64(math.MinInt64)>>(64-t.Bits()), int64(math.MaxInt64)>>(64-t.Bits())
			return fmt.Sprintf("must be a whole number from %d to %d, written without a fraction or exponent", lo, hi)
		}
		return "must be a whole number, not " + sent
	case reflect.String:
		return "must be a string, not " + sent
	case reflect.Bool:
		return "must be true or false, not " + sent
	}
	return "must be of another type than " + sent
}

// jsonKind names the kind of a well-formed JSON value, by its first byte.
func jsonKind(value json.RawMessage) string {
	v := bytes.TrimSpace(value)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}
