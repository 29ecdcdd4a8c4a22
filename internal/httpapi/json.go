package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

// maxBody bounds every JSON request body.
const maxBody = 64 << 10

// decodeJSON reads the request body into dst strictly: sent as JSON
// (jsonContentType), at most maxBody bytes, one JSON object, no unknown
// fields, every value of its field's type. Its errors are *httperr.Error:
// UNSUPPORTED_MEDIA_TYPE, or INVALID_ARGUMENT with a message that names
// the problem.
func decodeJSON(c *gin.Context, dst any) error {
	if err := jsonContentType(c.Request.Header.Get("Content-Type")); err != nil {
		return err
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, maxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return jsonError(err)
		}
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
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if mt == "application/json" && (err == nil || errors.Is(err, mime.ErrInvalidMediaParameter)) {
		return nil
	}
	if err != nil {
		return httperr.New(httperr.UnsupportedMediaType, "a malformed Content-Type; send the body as application/json")
	}
	return httperr.New(httperr.UnsupportedMediaType, "a body of %s is not read; send it as application/json", mt)
}

func jsonError(err error) *httperr.Error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return httperr.New(httperr.InvalidArgument, "request body is larger than %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return httperr.New(httperr.InvalidArgument, "request body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return httperr.New(httperr.InvalidArgument, "request body is truncated JSON")
	case errors.As(err, &syntax):
		return httperr.New(httperr.InvalidArgument, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return httperr.New(httperr.InvalidArgument, "request body must be a JSON object")
		}
		e := httperr.New(httperr.InvalidArgument, "%s: expected %s, got %s", field, typ.Type, typ.Value)
		e.Field = field
		return e
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return httperr.New(httperr.InvalidArgument, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default: // e.g. a time that is not RFC 3339
		return httperr.New(httperr.InvalidArgument, "invalid JSON: %v", err)
	}
}

// pathID reads a positive integer path parameter.
func pathID(c *gin.Context, name string) (int64, error) {
	s := c.Param(name)
	// Written plainly or refused: ParseInt takes a sign and leading zeros,
	// the round trip does not.
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != s {
		return 0, httperr.New(httperr.InvalidArgument, "%s %q is not a positive integer", name, s)
	}
	return id, nil
}
