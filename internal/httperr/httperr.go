// Package httperr is the API's one error shape and its one code → HTTP status
// table. Every handler answers failures through Write, so clients can rely on
//
//	{"error":{"code":"INVALID_ARGUMENT","message":"…","field":"total_stock"}}
//
// (field only when one request field is at fault) and on the codes below
// never changing meaning.
package httperr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Code is a stable, machine-readable error code.
type Code string

// The code set. Add codes; never change what one means.
const (
	InvalidArgument Code = "INVALID_ARGUMENT"
	Unauthenticated Code = "UNAUTHENTICATED"
	Forbidden       Code = "FORBIDDEN"
	NotFound        Code = "NOT_FOUND"
	Conflict        Code = "CONFLICT"
	SoldOut         Code = "SOLD_OUT"
	LimitExceeded   Code = "LIMIT_EXCEEDED"
	NotStarted      Code = "NOT_STARTED"
	Ended           Code = "ENDED"
	RateLimited     Code = "RATE_LIMITED"
	Unavailable     Code = "UNAVAILABLE"
	Internal        Code = "INTERNAL"
	GroupFull       Code = "GROUP_FULL"
	GroupClosed     Code = "GROUP_CLOSED"
	AlreadyMember   Code = "ALREADY_MEMBER"
	// MethodNotAllowed: the path exists, the method does not; the answer's
	// Allow header lists the methods that do.
	MethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	// UnsupportedMediaType: a request body sent as something other than
	// JSON (a form's, text/plain).
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	// InvalidSignature: a webhook whose signature does not verify, or whose
	// timestamp is too old (a replay): refused, nothing done.
	InvalidSignature Code = "INVALID_SIGNATURE"
	// Paused: the sale is paused by its admin and takes no orders or
	// groups until resumed; the answer's Retry-After says when to look
	// again.
	Paused Code = "PAUSED"
	// The waiting room's (docs/waiting-room.md).
	// NoWaitingRoom: the sale has no waiting room: order directly.
	NoWaitingRoom Code = "NO_WAITING_ROOM"
	// NotInQueue: the caller has not joined the sale's queue (POST first).
	NotInQueue Code = "NOT_IN_QUEUE"
	// AdmissionExpired: the caller was admitted and the admission lapsed
	// unused; one place per user, so it is not renewed.
	AdmissionExpired Code = "ADMISSION_EXPIRED"
	// PowRequired: the sale's join needs a proof of work (challenge, nonce).
	PowRequired Code = "POW_REQUIRED"
	// PowInvalid: the proof of work is not good (a challenge not given to
	// the caller for this sale, expired, or too few zero bits).
	PowInvalid Code = "POW_INVALID"
	// NotAdmitted: an order or group in a waiting-room sale without a valid
	// Admission-Token of the caller for the sale.
	NotAdmitted Code = "NOT_ADMITTED"
)

var statuses = map[Code]int{
	InvalidArgument: http.StatusBadRequest,
	Unauthenticated: http.StatusUnauthorized,
	Forbidden:       http.StatusForbidden,
	NotFound:        http.StatusNotFound,
	Conflict:        http.StatusConflict,
	SoldOut:         http.StatusConflict,
	LimitExceeded:   http.StatusConflict,
	NotStarted:      http.StatusConflict,
	Ended:           http.StatusConflict,
	RateLimited:     http.StatusTooManyRequests,
	Unavailable:     http.StatusServiceUnavailable,
	Internal:        http.StatusInternalServerError,
	GroupFull:       http.StatusConflict,
	GroupClosed:     http.StatusConflict,
	AlreadyMember:   http.StatusConflict,

	MethodNotAllowed:     http.StatusMethodNotAllowed,
	UnsupportedMediaType: http.StatusUnsupportedMediaType,
	InvalidSignature:     http.StatusBadRequest,
	Paused:               http.StatusConflict,
	NoWaitingRoom:        http.StatusConflict,
	NotInQueue:           http.StatusNotFound,
	AdmissionExpired:     http.StatusConflict,
	PowRequired:          http.StatusBadRequest,
	PowInvalid:           http.StatusBadRequest,
	NotAdmitted:          http.StatusForbidden,
}

// RetryAfter is the Retry-After, in seconds, of a 503 that sets none of its
// own: every 503 carries one (Write, and /readyz's).
const RetryAfter = "1"

// Status returns the HTTP status for code (500 for an unknown code).
func Status(code Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is an error the client may see: Code and Message go to the client,
// Cause only to the log.
type Error struct {
	Code    Code
	Message string
	// Field names the request field at fault (its JSON name), when one
	// is: a form can show the message beside it. Empty otherwise.
	Field string
	Cause error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// New returns an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Body is the JSON shape of every error answer.
type Body struct {
	Error struct {
		Code    Code   `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	} `json:"error"`
}

// Write answers err and aborts the request. An *Error (anywhere in err's
// chain) is shown as is; anything else is logged with its detail and shown as
// a bare internal error. A request whose client went away is 499. (What a
// request past its deadline is told is the API's to say, which knows what
// it waited on: internal/httpapi's late.)
func Write(c *gin.Context, err error) {
	var e *Error
	ctxErr := c.Request.Context().Err()
	if errors.Is(err, context.Canceled) && errors.Is(ctxErr, context.Canceled) {
		// The client went away (wrk stopping, a phone losing signal): nobody
		// reads this answer and nothing went wrong here. 499 is nginx's
		// "client closed request", for the access log.
		slog.DebugContext(c.Request.Context(), "client gone", "method", c.Request.Method, "path", c.FullPath())
		c.AbortWithStatus(499)
		return
	}
	if !errors.As(err, &e) {
		slog.ErrorContext(c.Request.Context(), "internal error", "method", c.Request.Method,
			"path", c.FullPath(), "err", err)
		e = &Error{Code: Internal, Message: "internal error"}
	} else if e.Cause != nil && Status(e.Code) >= 500 {
		slog.WarnContext(c.Request.Context(), "request failed", "code", e.Code, "method", c.Request.Method,
			"path", c.FullPath(), "err", e.Cause)
	}
	b := bodyOf(e)
	if Status(e.Code) == http.StatusServiceUnavailable && c.Writer.Header().Get("Retry-After") == "" {
		// Every 503 is worth retrying soon: Redis failing over, replicas
		// catching up, the schema being migrated. A retry of a request
		// that takes an Idempotency-Key, with the same key, gets the order
		// if it was made.
		c.Header("Retry-After", RetryAfter)
	}
	c.Set(codeKey, e.Code)
	c.AbortWithStatusJSON(Status(e.Code), b)
}

// codeKey is where Write and Canned.Write leave the answer's error code on
// the request's context, for the request metrics (CodeOf).
const codeKey = "httperr.code"

// CodeOf is the error code of the answer c was given ("" if none: a
// success, or an answer not written by this package).
func CodeOf(c *gin.Context) string {
	if v, ok := c.Get(codeKey); ok {
		code, _ := v.(Code)
		return string(code)
	}
	return ""
}

func bodyOf(e *Error) Body {
	var b Body
	b.Error.Code, b.Error.Message, b.Error.Field = e.Code, e.Message, e.Field
	return b
}

// Canned is a refusal encoded once, for one so frequent that encoding it
// per request shows: the sold-out gate answers the whole crowd that keeps
// clicking after a sale with one (docs/benchmarks.md, the sold-out path).
// It is only for a 4xx: a 5xx needs Write's log and Retry-After.
type Canned struct {
	status int
	body   []byte
	code   Code
}

// Can encodes e's answer as Write sends it.
func Can(e *Error) Canned {
	body, err := json.Marshal(bodyOf(e))
	if err != nil {
		panic(err) // a struct of strings always encodes
	}
	return Canned{status: Status(e.Code), body: body, code: e.Code}
}

// Write answers it, the same bytes as Write would, and aborts the request.
func (k Canned) Write(c *gin.Context) {
	c.Set(codeKey, k.code)
	c.Data(k.status, "application/json; charset=utf-8", k.body)
	c.Abort()
}
