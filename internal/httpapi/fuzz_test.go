package httpapi

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
)

// requestWith is a gin context whose request carries body.
func requestWith(body []byte) *gin.Context {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("POST", "/", bytes.NewReader(body))
	return c
}

// invalidArgument reports whether err is what a client's bad input must
// get: a 400 INVALID_ARGUMENT with a message, after the one error table.
func invalidArgument(err error) bool {
	var he *httperr.Error
	return errors.As(apiError(err), &he) && he.Code == httperr.InvalidArgument && he.Message != ""
}

// An order's (or a group's) body, decoded and validated as the handlers
// and the order domain do: never a panic; either a request within every
// bound — its item, if it names one, a sku (no ':' or '|' reaches Redis)
// — or INVALID_ARGUMENT with a message.
func FuzzOrderBody(f *testing.F) {
	for _, s := range []string{`{"quantity":1}`, `{"quantity":0}`, `{"quantity":-1}`, `{"quantity":1001}`,
		`{"quantity":1e3}`, `{"quantity":"1"}`, `{"quantity":null}`, `{}`, `[]`, `{"quantity":1}{"quantity":2}`,
		`{"quantity":1,"x":2}`, `{"quantity":99999999999999999999}`, ``, `{`, "{\"quantity\":1}\x00",
		`{"item":"PH-BLUE","quantity":1}`, `{"item":"a|b","quantity":1}`, `{"item":"7:R","quantity":1}`, `{"item":1,"quantity":1}`,
		`{"item":"","quantity":2}`, `{"item":null,"quantity":1}`} {
		f.Add([]byte(s), "key-1")
	}
	f.Fuzz(func(t *testing.T, body []byte, idem string) {
		c := requestWith(body)
		var req orderBody
		err := decodeJSON(c, &req)
		qty := 0
		if err == nil {
			qty, err = required(req.Quantity)
		}
		if err != nil {
			if !invalidArgument(err) {
				t.Fatalf("body %q: %v, want INVALID_ARGUMENT", body, err)
			}
			return
		}
		r := order.PlaceRequest{ActivityID: 1, UserID: 1, Quantity: qty, IdempotencyKey: idem, Item: req.Item}
		if err := r.Validate(); err != nil {
			if !invalidArgument(err) {
				t.Fatalf("quantity %d key %q item %q: %v, want INVALID_ARGUMENT", qty, idem, req.Item, err)
			}
			return
		}
		if qty < 1 || qty > order.MaxQuantity || (idem != "" && !order.ValidIdempotencyKey(idem)) ||
			(req.Item != "" && !activity.ValidSKU(req.Item)) || strings.ContainsAny(req.Item, ":|") {
			t.Fatalf("accepted quantity %d, key %q, item %q", qty, idem, req.Item)
		}
	})
}

// An admin's new activity: decoded and validated as the create handler and
// the admin service do. Never a panic; either an activity within every
// limit that reads back as sent, or INVALID_ARGUMENT naming the problem.
func FuzzActivityBody(f *testing.F) {
	valid := `{"type":"seckill","name":"Phone","sku":"P1","price_cents":100,"total_stock":10,"per_user_limit":1,` +
		`"starts_at":"2026-11-23T10:00:00Z","ends_at":"2026-11-23T11:00:00Z"}`
	for _, s := range []string{valid,
		`{"type":"groupbuy","name":"G","sku":"G1","price_cents":1,"total_stock":1,"per_user_limit":1,` +
			`"starts_at":"2026-11-23T10:00:00Z","ends_at":"2026-11-23T11:00:00Z","group_size":2,"group_ttl_seconds":600}`,
		`{"type":"seckill","payment_ttl_seconds":18446744074}`, `{"type":"seckill","payment_ttl_seconds":-9223372036}`,
		`{"name":"\u0000"}`, `{"starts_at":"tomorrow"}`, `{"total_stock":1e10}`, `null`, `{"type":1}`,
		`{"type":"seckill","name":"Phone","per_user_limit":2,"starts_at":"2026-11-23T10:00:00Z","ends_at":"2026-11-23T11:00:00Z",` +
			`"items":[{"sku":"R","label":"Red","price_cents":100,"stock":10},{"sku":"B","label":"Blue","price_cents":90,"stock":5,"per_user_limit":1}]}`,
		`{"items":[]}`, `{"items":[{"sku":"R","stock":1.5}]}`, `{"items":[{"colour":"red"}]}`, `{"items":{}}`, `{"items":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req createRequest
		if err := decodeJSON(requestWith(body), &req); err != nil {
			if !invalidArgument(err) {
				t.Fatalf("body %q: %v, want INVALID_ARGUMENT", body, err)
			}
			return
		}
		a := req.activity()
		if a.PaymentTTL == 0 {
			a.PaymentTTL = activity.DefaultPaymentTTL // as admin.Service.Create
		}
		a.Status = activity.Draft
		if err := a.Validate(); err != nil {
			if !invalidArgument(err) {
				t.Fatalf("body %q: %v, want INVALID_ARGUMENT", body, err)
			}
			return
		}
		// What passed is what was asked for: no overflow turned a number
		// into another that happens to be valid.
		if req.PaymentTTLSeconds != 0 && time.Duration(req.PaymentTTLSeconds)*time.Second != a.PaymentTTL ||
			a.GroupTTL != time.Duration(req.GroupTTLSeconds)*time.Second || int64(req.PaymentTTLSeconds) > int64(activity.MaxPaymentTTL/time.Second) {
			t.Fatalf("body %q became %+v", body, a)
		}
		a.Normalize() // as admin.Service.Create
		if a.TotalStock < 1 || a.TotalStock > activity.MaxStock || a.PerUserLimit < 1 || !a.EndsAt.After(a.StartsAt) {
			t.Fatalf("accepted %+v", a)
		}
		items, sum := a.ItemList(), 0
		for _, it := range items {
			if it.Stock < 1 || it.PriceCents < 1 || it.PerUserLimit < 0 {
				t.Fatalf("accepted an item %+v", it)
			}
			sum += it.Stock
		}
		if len(items) < 1 || len(items) > activity.MaxItems || sum != a.TotalStock {
			t.Fatalf("accepted %d items of %d units, total_stock %d", len(items), sum, a.TotalStock)
		}
	})
}

// A change to an activity: decoded and applied to a draft and to a
// published sale as the update handler does. Never a panic; the result is
// valid, or the change is refused with INVALID_ARGUMENT or CONFLICT and the
// activity is unchanged.
func FuzzActivityPatch(f *testing.F) {
	for _, s := range []string{`{"name":"x"}`, `{"ends_at":"2027-01-01T00:00:00Z"}`, `{"ends_at":"2000-01-01T00:00:00Z"}`,
		`{"total_stock":5}`, `{"group_ttl_seconds":18446744074}`, `{"payment_ttl_seconds":null}`, `{"status":"draft"}`, `{}`,
		`{"items":[{"sku":"A","price_cents":1,"stock":2},{"sku":"B","price_cents":2,"stock":3}]}`, `{"items":[]}`} {
		f.Add([]byte(s))
	}
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	base := activity.Activity{ID: 1, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 1, TotalStock: 10,
		PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour), PaymentTTL: time.Minute, Status: activity.Draft}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req patchRequest
		if err := decodeJSON(requestWith(body), &req); err != nil {
			if !invalidArgument(err) {
				t.Fatalf("body %q: %v, want INVALID_ARGUMENT", body, err)
			}
			return
		}
		for _, st := range []activity.Status{activity.Draft, activity.Published, activity.Closed} {
			a := base
			a.Status = st
			before := a
			if err := a.Apply(req.patch()); err != nil {
				var he *httperr.Error
				if !errors.As(apiError(err), &he) || (he.Code != httperr.InvalidArgument && he.Code != httperr.Conflict) || !reflect.DeepEqual(a, before) {
					t.Fatalf("%s, body %q: %v (activity now %+v)", st, body, err, a)
				}
				continue
			}
			if err := a.Validate(); err != nil || a.Status != st {
				t.Fatalf("%s, body %q: applied to an invalid activity %+v: %v", st, body, a, err)
			}
			if st != activity.Draft && (a.TotalStock != before.TotalStock || a.PriceCents != before.PriceCents || a.EndsAt.Before(before.EndsAt) ||
				!reflect.DeepEqual(a.Items, before.Items)) {
				t.Fatalf("%s, body %q: changed what a live sale may not: %+v", st, body, a)
			}
		}
	})
}
