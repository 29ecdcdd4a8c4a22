package httpapi_test

import (
	"fmt"
	"testing"
	"time"
)

// A sale of three items through the API, as the document says, end to end
// (issue 40): items created and validated by their place, orders naming
// their item at its price, an item sold out by name, restocked live and
// selling again at once, unsold units removed but never sold ones, a pause
// that refuses orders with Retry-After and a resume, and a close that wins.
func TestContract_liveAPI_items_restock_pause_asDocumented(t *testing.T) {
	l := startLiveAPI(t)
	adm := []string{"Authorization", "Bearer " + token}
	window := fmt.Sprintf(`"starts_at":%q,"ends_at":%q`, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	bad := l.do(t, "POST", "/admin/v1/activities", `{"type":"seckill","name":"Phone","per_user_limit":2,`+window+`,
		"items":[{"sku":"RED","price_cents":500,"stock":2},{"sku":"BLUE","price_cents":400,"stock":1},{"sku":"GOLD","price_cents":900,"stock":0}]}`, adm...)
	want(t, "an item of no stock", bad, 400, "INVALID_ARGUMENT")
	if bad.errorOf("field") != "items[2].stock" {
		t.Fatalf("the field at fault: %q, want items[2].stock", bad.errorOf("field"))
	}
	a := l.do(t, "POST", "/admin/v1/activities", `{"type":"seckill","name":"Phone","per_user_limit":2,`+window+`,
		"items":[{"sku":"RED","label":"Red","price_cents":500,"stock":2},{"sku":"BLUE","label":"Blue","price_cents":400,"stock":1,"per_user_limit":1},
		{"sku":"GOLD","label":"Gold","price_cents":900,"stock":1}]}`, adm...)
	want(t, "create", a, 201)
	if a.body["total_stock"] != float64(4) || a.str("sku") != "RED" || a.body["price_cents"] != float64(500) {
		t.Fatalf("created: %v", a.body)
	}
	id := int64(a.body["id"].(float64))
	path := fmt.Sprintf("/admin/v1/activities/%d", id)
	want(t, "publish", l.do(t, "POST", path+"/publish", "", adm...), 200)
	orders := fmt.Sprintf("/v1/activities/%d/orders", id)
	place := func(user int64, body string) answer {
		return l.do(t, "POST", orders, body, "Authorization", l.bearer(t, user))
	}

	for _, body := range []string{`{"quantity":1}`, `{"item":"PINK","quantity":1}`} {
		r := place(1, body)
		want(t, body, r, 400, "INVALID_ARGUMENT")
		if r.errorOf("field") != "item" {
			t.Fatalf("%s: field %q, want item", body, r.errorOf("field"))
		}
	}
	o := place(1, `{"item":"BLUE","quantity":1}`)
	want(t, "a blue", o, 202)
	if o.str("item") != "BLUE" || o.body["price_cents"] != float64(400) || o.body["amount_cents"] != float64(400) {
		t.Fatalf("a blue: %v", o.body)
	}
	want(t, "a gold", place(2, `{"item":"GOLD","quantity":1}`), 202)
	gone := place(3, `{"item":"GOLD","quantity":1}`)
	want(t, "a gold, none left", gone, 409, "SOLD_OUT")
	if gone.errorOf("field") != "item" || gone.errorOf("message") != `item "GOLD" is sold out` {
		t.Fatalf("sold out: %v", gone.body)
	}
	pub := l.do(t, "GET", fmt.Sprintf("/v1/activities/%d", id), "")
	want(t, "the public view", pub, 200)
	items, _ := pub.body["items"].([]any)
	if len(items) != 3 || items[2].(map[string]any)["stock_remaining"] != float64(0) || pub.body["stock_remaining"] != float64(2) {
		t.Fatalf("the public view: %v", pub.body)
	}

	// Restocked live: sells again at once (the local sold-out flag let go).
	r := l.do(t, "POST", path+"/stock", `{"item":"GOLD","add":2}`, adm...)
	want(t, "restock", r, 200)
	if ch, _ := r.body["change"].(map[string]any); ch["stock_after"] != float64(3) || ch["add"] != float64(2) {
		t.Fatalf("restock's change: %v", r.body)
	}
	want(t, "a gold after the restock", place(3, `{"item":"GOLD","quantity":1}`), 202)
	want(t, "removing more than unsold", l.do(t, "POST", path+"/stock", `{"item":"GOLD","add":-2}`, adm...), 409, "CONFLICT")
	want(t, "removing the unsold one", l.do(t, "POST", path+"/stock", `{"item":"GOLD","add":-1}`, adm...), 200)
	want(t, "an add of 0", l.do(t, "POST", path+"/stock", `{"item":"GOLD","add":0}`, adm...), 400, "INVALID_ARGUMENT")
	d := l.do(t, "GET", path, "", adm...)
	want(t, "the admin view", d, 200)
	gold := d.body["items"].([]any)[2].(map[string]any)
	if gold["stock"] != float64(2) || gold["sold"] != float64(2) || gold["stock_remaining"] != float64(0) || d.body["total_stock"] != float64(5) {
		t.Fatalf("gold in the admin view: %v (total %v)", gold, d.body["total_stock"])
	}

	// Paused: refused with Retry-After, until resumed; twice is once.
	want(t, "pause", l.do(t, "POST", path+"/pause", "", adm...), 200)
	p := l.do(t, "POST", path+"/pause", "", adm...)
	want(t, "pause again", p, 200)
	if p.body["paused"] != true {
		t.Fatalf("paused: %v", p.body)
	}
	paused := place(4, `{"item":"RED","quantity":1}`)
	want(t, "an order while paused", paused, 409, "PAUSED")
	if paused.header.Get("Retry-After") == "" {
		t.Fatal("PAUSED without Retry-After")
	}
	want(t, "resume", l.do(t, "POST", path+"/resume", "", adm...), 200)
	want(t, "an order once resumed", place(4, `{"item":"RED","quantity":1}`), 202)

	// Closed wins: a paused sale closes, and nothing reopens it.
	want(t, "pause before the close", l.do(t, "POST", path+"/pause", "", adm...), 200)
	c := l.do(t, "POST", path+"/close", "", adm...)
	want(t, "close", c, 200)
	if c.body["paused"] != false || c.str("status") != "closed" {
		t.Fatalf("closed: %v", c.body)
	}
	want(t, "resume a closed sale", l.do(t, "POST", path+"/resume", "", adm...), 409, "CONFLICT")
	want(t, "an order after the close", place(5, `{"item":"RED","quantity":1}`), 409, "ENDED")
}
