package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

// maxBody bounds every JSON request body.
const maxBody = 64 << 10

// decodeJSON reads the request body into dst, a pointer to a struct of
// plain fields (json tags; an array of such structs at most: an
// activity's items), strictly: sent as JSON
// (jsonContentType), at most maxBody bytes, one JSON object, no unknown
// fields, every value of its field's type. Its errors are *httperr.Error:
// UNSUPPORTED_MEDIA_TYPE, or INVALID_ARGUMENT with a message that names
// the problem and, when one member of the object is at fault, its name as
// Field.
func decodeJSON(c *gin.Context, dst any) error {
	raw, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeRaw(raw, dst)
}

// readBody reads a JSON request's body: decodeJSON's Content-Type and
// size checks.
func readBody(c *gin.Context) ([]byte, error) {
	if err := jsonContentType(c.Request.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if n := c.Request.ContentLength; n >= 0 && n <= maxBody {
		// The length is declared and within bounds (the server reads no
		// more than it): read it into a buffer of its size, without
		// io.ReadAll's 512-byte start and MaxBytesReader's wrapper, 2 µs of
		// a fresh shopper's order in the api's profile (issue 43).
		raw := make([]byte, n)
		if _, err := io.ReadFull(c.Request.Body, raw); err != nil {
			return nil, &httperr.Error{Code: httperr.InvalidArgument, Message: "the request body could not be read", Cause: err}
		}
		return raw, nil
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, httperr.New(httperr.InvalidArgument, "request body is larger than %d bytes", tooBig.Limit)
		}
		return nil, &httperr.Error{Code: httperr.InvalidArgument, Message: "the request body could not be read", Cause: err}
	}
	return raw, nil
}

// decodeRaw is decodeJSON's decode of a body already read.
func decodeRaw(raw []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, raw, dst)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return httperr.New(httperr.InvalidArgument, "request body must be a single JSON object")
	}
	return nil
}

// jsonContentType admits the Content-Type of a JSON body:
// application/json with any parameters (a charset), or none at all (a
// client that sends no Content-Type is taken at its word). Anything else —
// a form's, which is what curl -d sends, or text/plain — is 415
// UNSUPPORTED_MEDIA_TYPE: reading it as JSON would guess at what the
// client meant, and the contract lists application/json alone.
func jsonContentType(ct string) error {
	switch ct {
	case "", "application/json", "application/json; charset=utf-8":
		return nil // what clients send, without ParseMediaType's map
	}
	// ParseMediaType lowercases the type, and returns it with
	// ErrInvalidMediaParameter when only a parameter is malformed.
	mt, _, err := mime.ParseMediaType(ct)
	if mt == "application/json" && (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) {
		return nil
	}
	if err != nil {
		return httperr.New(httperr.UnsupportedMediaType, "a malformed Content-Type; send the body as application/json")
	}
	return httperr.New(httperr.UnsupportedMediaType, "a body of %s is not read; send it as application/json", mt)
}

// jsonError is the client's answer for dec.Decode's err on raw into dst:
// the body as a whole when its JSON is broken, else the member at fault,
// found by memberFault (encoding/json says which member only for some
// errors, and for an unknown one only in its text).
func jsonError(err error, raw []byte, dst any) *httperr.Error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return httperr.New(httperr.InvalidArgument, "request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return httperr.New(httperr.InvalidArgument, "request body is truncated JSON")
	case errors.As(err, &syntax):
		return httperr.New(httperr.InvalidArgument, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	}
	if e := memberFault(raw, dst); e != nil {
		return e
	}
	return &httperr.Error{Code: httperr.InvalidArgument, Message: "request body does not fit this request", Cause: err}
}

// pathID reads a positive integer path parameter; its error is
// INVALID_ARGUMENT naming the parameter as Field (paramError).
func pathID(c *gin.Context, name string) (int64, error) { return positiveParam(name, c.Param(name)) }

// positiveParam reads parameter name's value s as a positive integer (an
// id: 1 to the largest int64); its error is intParam's.
func positiveParam(name, s string) (int64, error) { return intParam(name, s, 1, math.MaxInt64) }

// intParam reads parameter name's value s as an integer from lo to hi,
// written plainly (ParseInt takes a sign and leading zeros, the round trip
// does not). Its error is paramError's, and states the range: every
// integer parameter, a path id as a page size, is read here and says its
// own bounds. A plain number past hi — past int64 too, which ParseInt
// only calls out of range — is said to be too large: it is an integer.
func intParam(name, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err == nil && n >= lo && n <= hi && strconv.FormatInt(n, 10) == s {
		return n, nil
	}
	if plainDigits(s) && (err != nil || n > hi) {
		return 0, paramError(name, "%s %q is too large: want an integer from %d to %d", name, s, lo, hi)
	}
	return 0, paramError(name, "%s %q: want an integer from %d to %d", name, s, lo, hi)
}

// plainDigits reports whether s is a whole number written plainly: ASCII
// digits, no sign, no leading zero.
func plainDigits(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// paramError is the 400 of a query or path parameter at fault: a message
// for a person, and the parameter's name as Field, as a body member at
// fault is named (memberFault).
func paramError(name, format string, args ...any) *httperr.Error {
	e := httperr.New(httperr.InvalidArgument, format, args...)
	e.Field = name
	return e
}
