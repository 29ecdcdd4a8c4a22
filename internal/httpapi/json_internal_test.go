package httpapi

import (
	"errors"
	"testing"

	"github.com/flashsale/flashsale/internal/httperr"
)

// A body is read as JSON when it says it is, with any parameters, or says
// nothing; any other type is 415 UNSUPPORTED_MEDIA_TYPE.
func TestJSONContentType_jsonOrNone_othersAre415(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		ok          bool
	}{
		{"", true},
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON; charset=UTF-8", true},
		{"application/json;charset=latin1", true},
		{"application/json; charset", true}, // a malformed parameter of JSON is still JSON
		{"application/x-www-form-urlencoded", false},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"multipart/form-data; boundary=x", false},
		{"application/merge-patch+json", false},
		{"application/jsonx", false},
		{"json", false},
		{"/", false},
	} {
		err := jsonContentType(tc.contentType)
		var he *httperr.Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: %v, want it read", tc.contentType, err)
		case !tc.ok && (!errors.As(err, &he) || he.Code != httperr.UnsupportedMediaType || he.Message == ""):
			t.Errorf("%q: %v, want UNSUPPORTED_MEDIA_TYPE", tc.contentType, err)
		}
	}
}
