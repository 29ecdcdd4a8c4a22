package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
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
		{"quantity a fraction", newQuantity, `{"quantity":1.5}`, "quantity",
			"quantity: must be a whole number between 1 and 1000, written without a fraction or exponent"},
		{"quantity an exponent", newQuantity, `{"quantity":1e3}`, "quantity",
			"quantity: must be a whole number between 1 and 1000, written without a fraction or exponent"},
		{"quantity too large", newQuantity, `{"quantity":99999999999999999999}`, "quantity",
			"quantity: must be a whole number between 1 and 1000"},
		{"quantity too small", newQuantity, `{"quantity":-99999999999999999999}`, "quantity",
			"quantity: must be a whole number between 1 and 1000"},
		{"total_stock a fraction", newCreate, `{"total_stock":2.5}`, "total_stock",
			"total_stock: must be a whole number between 1 and 10000000, written"},
		{"price_cents past int64", newPatch, `{"price_cents":1e30}`, "price_cents", "between 1 and 100000000000,"},
		{"group_ttl_seconds past int", newCreate, `{"group_ttl_seconds":99999999999999999999}`, "group_ttl_seconds",
			"group_ttl_seconds: must be a whole number between 10 and 604800"},
		{"activity_id a fraction", newHeartbeat, `{"activity_id":4.2}`, "activity_id",
			"activity_id: must be a whole number between 1 and 9223372036854775807, written"},
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
		{"an item's stock a fraction", newCreate, `{"items":[{"sku":"A","stock":1},{"sku":"B","stock":1.5}]}`, "items[1].stock",
			"items[1].stock: must be a whole number between 1 and 10000000, written"},
		{"an item's unknown member", newCreate, `{"items":[{"sku":"A","colour":"red"}]}`, "items[0].colour", "is not a field"},
		{"an item a number", newPatch, `{"items":[7]}`, "items[0]", "items[0]: must be an object, not a number"},
		{"items an object", newCreate, `{"items":{"sku":"A"}}`, "items", "items: must be an array, not an object"},
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

// The request bodies the API decodes, for the tests that look at every
// member of every one.
var requestBodies = []any{quantityBody{}, orderBody{}, createRequest{}, patchRequest{}, itemJSON{}, restockRequest{}, heartbeatBody{}}

// Every whole-number member of a request body has its range in
// wholeRanges: none is refused with the range of Go's int.
func TestWholeRanges_everyWholeNumberMemberHasOne(t *testing.T) {
	for _, body := range requestBodies {
		typ := reflect.TypeOf(body)
		for i := range typ.NumField() {
			f := typ.Field(i)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() < reflect.Int || ft.Kind() > reflect.Int64 || ft == reflect.TypeFor[time.Duration]() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if _, ok := wholeRanges[name]; !ok {
				t.Errorf("%T.%s (%q) has no range in wholeRanges", body, f.Name, name)
			}
		}
	}
}

// The ranges wholeRanges states are the domains': each bound is accepted,
// and one past it refused by the domain naming the same field. Not a
// zero that means "not given": shards 0 is one shard, presence's
// activity_id 0 watches none (and no number past its bound fits).
func TestWholeRanges_agreeWithTheDomains(t *testing.T) {
	valid := func(name string, n int64) error {
		if name == "quantity" {
			return order.PlaceRequest{ActivityID: 1, UserID: 1, Quantity: int(n)}.Validate()
		}
		if name == "add" { // a restock's
			return activity.CheckStockChange(int(n))
		}
		typ, group := "seckill", ""
		if strings.HasPrefix(name, "group_") {
			typ, group = "groupbuy", `,"group_size":3,"group_ttl_seconds":600`
		}
		body := fmt.Sprintf(`{"type":%q,"name":"Phone","sku":"P1","price_cents":500,"total_stock":1000,"per_user_limit":1,
			"starts_at":"2026-12-01T10:00:00Z","ends_at":"2026-12-01T11:00:00Z","payment_ttl_seconds":900%s}`, typ, group)
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		switch name {
		case "admit_per_second", "admission_ttl_seconds", "join_pow_bits": // a sale with a waiting room's
			m["waiting_room"], m["admit_per_second"] = true, 100
		}
		m[name] = n
		if name == "stock" { // an item's: the sale in the items form
			delete(m, "sku")
			delete(m, "price_cents")
			delete(m, "total_stock")
			m["items"] = []any{map[string]any{"sku": "A", "price_cents": 1, "stock": 1}, map[string]any{"sku": "B", "price_cents": 1, "stock": n}}
		}
		raw, _ := json.Marshal(m)
		var req createRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		a := req.activity()
		return a.Validate()
	}
	refusedNaming := func(err error, name string) bool {
		var fe *activity.FieldError
		if errors.As(err, &fe) {
			return fe.Field == name || fe.Field == "items[1]."+name
		}
		return refusal.Field(err) == name
	}
	for name, r := range wholeRanges {
		if name == "activity_id" {
			continue
		}
		for _, n := range []int64{r.lo, r.hi} {
			if err := valid(name, n); refusedNaming(err, name) {
				t.Errorf("%s %d, a bound of its range: refused, %v", name, n, err)
			}
		}
		for _, n := range []int64{r.lo - 1, r.hi + 1} {
			if n == 0 && name == "shards" {
				continue
			}
			if err := valid(name, n); !refusedNaming(err, name) {
				t.Errorf("%s %d, past its range: %v, want it refused naming %s", name, n, err, name)
			}
		}
	}
}

// A body is read whole whether its length is declared (the usual
// request: read into a buffer of that size) or not (chunked: read up to
// maxBody); a body shorter than it declared is a 400, not a partial read.
func TestReadBody_declaredOrNot(t *testing.T) {
	body := []byte(`{"quantity":1}`)
	for _, declared := range []int64{int64(len(body)), -1} {
		c := requestWith(body)
		c.Request.ContentLength = declared
		raw, err := readBody(c)
		if err != nil || string(raw) != string(body) {
			t.Fatalf("declared %d: %q, %v", declared, raw, err)
		}
	}
	c := requestWith(nil)
	if raw, err := readBody(c); err != nil || len(raw) != 0 {
		t.Fatalf("empty: %q, %v", raw, err)
	}
	c = requestWith(body)
	c.Request.ContentLength = int64(len(body)) + 5
	var he *httperr.Error
	if raw, err := readBody(c); !errors.As(err, &he) || he.Code != httperr.InvalidArgument || !strings.Contains(he.Message, "could not be read") {
		t.Fatalf("a body shorter than declared: %q, %v", raw, err)
	}
	c = requestWith([]byte(strings.Repeat("x", maxBody+1)))
	c.Request.ContentLength = -1
	if _, err := readBody(c); !errors.As(err, &he) || !strings.Contains(he.Message, "larger than 65536 bytes") {
		t.Fatalf("a chunked body over the bound: %v", err)
	}
}

// go test -run '^$' -bench ReadBody -benchmem ./internal/httpapi/: an
// order's body, its length declared (read into its size) and not
// (io.ReadAll through MaxBytesReader, as every body was read before).
func BenchmarkReadBody(b *testing.B) {
	body := []byte(`{"quantity":1}`)
	for _, bc := range []struct {
		name     string
		declared int64
	}{{"declared", int64(len(body))}, {"undeclared (before)", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			c := requestWith(body)
			r := bytes.NewReader(body)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(body)
				c.Request.Body, c.Request.ContentLength = io.NopCloser(r), bc.declared
				if _, err := readBody(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
