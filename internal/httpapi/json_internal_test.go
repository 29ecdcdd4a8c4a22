package httpapi

import (
	"errors"
	"strings"
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

// A body that does not fit is INVALID_ARGUMENT; when one member is at
// fault the error names it as Field, the first in the body's order, with a
// message a person reads (no Go type names, no "parsing time"); a fault of
// the body as a whole names none.
func TestDecodeJSON_badBody_namesTheMemberAtFault(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dst   func() any
		body  string
		field string
		says  string // in the message
	}{
		{"quantity a string", newQuantity, `{"quantity":"lots"}`, "quantity", "quantity: must be a whole number, not a string"},
		{"quantity a fraction", newQuantity, `{"quantity":1.5}`, "quantity", "whole number from -9223372036854775808 to 9223372036854775807"},
		{"quantity too large", newQuantity, `{"quantity":99999999999999999999}`, "quantity", "whole number from"},
		{"quantity an object", newQuantity, `{"quantity":{"n":1}}`, "quantity", "not an object"},
		{"quantity in another case", newQuantity, `{"Quantity":true}`, "quantity", "not true or false"},
		{"an unknown member", newQuantity, `{"quantity":1,"coupon":"x"}`, "coupon", "coupon: is not a field of this request"},
		{"the first fault in the body's order", newQuantity, `{"zzz":1,"quantity":"x"}`, "zzz", "zzz: is not"},
		{"starts_at tomorrow", newCreate, `{"type":"seckill","starts_at":"tomorrow"}`, "starts_at",
			"starts_at: must be a time in RFC 3339 form, e.g. 2026-12-01T10:00:00Z"},
		{"starts_at a number", newCreate, `{"starts_at":5}`, "starts_at", "RFC 3339"},
		{"ends_at month 13", newPatch, `{"ends_at":"2026-13-01T00:00:00Z"}`, "ends_at", "RFC 3339"},
		{"type a number", newCreate, `{"type":1}`, "type", "type: must be a string, not a number"},
		{"total_stock a string", newCreate, `{"total_stock":"10"}`, "total_stock", "not a string"},
		{"a patch of status", newPatch, `{"status":"draft"}`, "status", "is not a field"},
		{"device_id a number", newHeartbeat, `{"device_id":7}`, "device_id", "must be a string, not a number"},
		{"activity_id a string", newHeartbeat, `{"activity_id":"42"}`, "activity_id", "whole number, not a string"},
		{"an array", newQuantity, `[1, 2]`, "", "must be a JSON object"},
		{"a string", newCreate, `"x"`, "", "must be a JSON object"},
		{"empty", newQuantity, ``, "", "empty"},
		{"truncated", newQuantity, `{"quantity":`, "", "truncated"},
		{"malformed", newQuantity, `{"quantity" 1}`, "", "malformed JSON at byte"},
		{"two objects", newQuantity, `{"quantity":1}{"quantity":2}`, "", "single JSON object"},
		{"too large", newCreate, `{"name":"` + strings.Repeat("x", maxBody) + `"}`, "", "larger than 65536 bytes"},
	} {
		err := decodeJSON(requestWith([]byte(tc.body)), tc.dst())
		var he *httperr.Error
		if !errors.As(err, &he) || he.Code != httperr.InvalidArgument || he.Field != tc.field ||
			!strings.Contains(he.Message, tc.says) || strings.Contains(he.Message, "parsing time") ||
			strings.Contains(he.Message, "Go struct") {
			t.Errorf("%s: %#v, want field %q saying %q", tc.name, err, tc.field, tc.says)
		}
	}
}

// A body that fits decodes as encoding/json does: members in any case,
// null leaving a field unset.
func TestDecodeJSON_goodBody_decodes(t *testing.T) {
	var q quantityBody
	if err := decodeJSON(requestWith([]byte(`{"Quantity": 3}`)), &q); err != nil || q.Quantity == nil || *q.Quantity != 3 {
		t.Fatalf("%v %v", err, q.Quantity)
	}
	var p patchRequest
	if err := decodeJSON(requestWith([]byte(`{"name":"x","ends_at":null}`)), &p); err != nil || *p.Name != "x" || p.EndsAt != nil {
		t.Fatalf("%v %+v", err, p)
	}
}

func newQuantity() any  { return &quantityBody{} }
func newCreate() any    { return &createRequest{} }
func newPatch() any     { return &patchRequest{} }
func newHeartbeat() any { return &heartbeatBody{} }
