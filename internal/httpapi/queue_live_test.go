package httpapi_test

import (
	"fmt"
	"testing"
	"time"
)

// A sale with a waiting room, end to end through the api: the admin API
// creates it (bad settings refused, naming the field), a shopper joins and
// reads their place, is admitted, and orders only with their own
// Admission-Token (missing, forged, another user's, another sale's: 403
// NOT_ADMITTED, nothing ordered); admit_per_second changes while published,
// waiting_room does not; a sale without a room answers NO_WAITING_ROOM and
// takes orders with no token, as before.
func TestQueue_liveAPI_joinAdmitOrder_andRefusals(t *testing.T) {
	l := startLiveAPI(t)
	adm := []string{"Authorization", "Bearer " + token}
	window := fmt.Sprintf(`"starts_at":%q,"ends_at":%q`, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	body := func(room string) string {
		return `{"type":"seckill","name":"Phone","sku":"P1","price_cents":500,"total_stock":10,"per_user_limit":1,` + window + room + `}`
	}
	for _, c := range []struct{ room, field string }{
		{`,"waiting_room":true`, "admit_per_second"},
		{`,"waiting_room":true,"admit_per_second":100,"admission_ttl_seconds":5`, "admission_ttl_seconds"},
		{`,"waiting_room":true,"admit_per_second":100,"join_pow_bits":25`, "join_pow_bits"},
		{`,"admit_per_second":100`, "admit_per_second"},
	} {
		a := l.do(t, "POST", "/admin/v1/activities", body(c.room), adm...)
		want(t, "create "+c.room, a, 400, "INVALID_ARGUMENT")
		if a.errorOf("field") != c.field {
			t.Errorf("create %s: field %q, want %q", c.room, a.errorOf("field"), c.field)
		}
	}
	a := l.do(t, "POST", "/admin/v1/activities", body(`,"waiting_room":true,"admit_per_second":1000`), adm...)
	want(t, "create with a room", a, 201)
	if a.body["waiting_room"] != true || a.body["admission_ttl_seconds"] != 300.0 || a.body["admit_per_second"] != 1000.0 {
		t.Fatalf("created: %v", a.body)
	}
	sale := int64(a.body["id"].(float64))
	want(t, "publish", l.do(t, "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", sale), "", adm...), 200)
	path := fmt.Sprintf("/admin/v1/activities/%d", sale)
	want(t, "patch waiting_room published", l.do(t, "PATCH", path, `{"waiting_room":false}`, adm...), 409, "CONFLICT")
	if a := l.do(t, "PATCH", path, `{"admit_per_second":2000}`, adm...); a.code != 200 || a.body["admit_per_second"] != 2000.0 {
		t.Fatalf("patch admit_per_second: %d %v", a.code, a.body)
	}
	if a := l.do(t, "GET", path, "", adm...); a.body["admit_per_second"] != 2000.0 || a.body["waiting_room"] != true {
		t.Fatalf("admin get: %v", a.body)
	}

	if a := l.do(t, "GET", fmt.Sprintf("/v1/activities/%d", sale), ""); a.body["waiting_room"] != true {
		t.Fatalf("the public view: %v, want waiting_room true", a.body)
	}
	queue := fmt.Sprintf("/v1/activities/%d/queue", sale)
	orders := fmt.Sprintf("/v1/activities/%d/orders", sale)
	u7, u8 := l.bearer(t, 7), l.bearer(t, 8)
	want(t, "read before joining", l.do(t, "GET", queue, "", "Authorization", u7), 404, "NOT_IN_QUEUE")
	want(t, "join with a bad body", l.do(t, "POST", queue, `{"nonce":`, "Authorization", u7), 400, "INVALID_ARGUMENT")
	want(t, "join unauthenticated", l.do(t, "POST", queue, ""), 401, "UNAUTHENTICATED")
	want(t, "join", l.do(t, "POST", queue, "", "Authorization", u7), 200)
	want(t, "join as 8", l.do(t, "POST", queue, "", "Authorization", u8), 200)
	var place answer
	for range 50 {
		if place = l.do(t, "GET", queue, "", "Authorization", u7); place.str("status") == "admitted" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok := place.str("admission_token")
	if place.code != 200 || tok == "" || place.str("admitted_until") == "" {
		t.Fatalf("not admitted: %d %v", place.code, place.body)
	}
	// User 8 is admitted once the counter next advances (at most 10 ms
	// after the last advance, the script's step): poll as a client would.
	// One read right after user 7's admission may still see it waiting —
	// queue.lua answered so too within the step; the poll's fast path is
	// only quick enough to land there every time.
	var other answer
	for range 50 {
		if other = l.do(t, "GET", queue, "", "Authorization", u8); other.str("status") == "admitted" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if other.str("admission_token") == "" {
		t.Fatalf("user 8 not admitted: %v", other.body)
	}
	plain := l.sale(t, 10, 0)
	want(t, "join a sale without a room", l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/queue", plain), "", "Authorization", u7),
		409, "NO_WAITING_ROOM")
	for name, h := range map[string][]string{
		"no token":           {"Authorization", u7},
		"a forged token":     {"Authorization", u7, "Admission-Token", tok[:len(tok)-4] + "AAAA"},
		"another user's":     {"Authorization", u7, "Admission-Token", other.str("admission_token")},
		"a token of garbage": {"Authorization", u7, "Admission-Token", "not-a-token"},
	} {
		want(t, "order with "+name, l.do(t, "POST", orders, `{"quantity":1}`, h...), 403, "NOT_ADMITTED")
	}
	want(t, "order with the token", l.do(t, "POST", orders, `{"quantity":1}`, "Authorization", u7, "Admission-Token", tok), 202)
	want(t, "an order of the plain sale with another sale's token",
		l.do(t, "POST", fmt.Sprintf("/v1/activities/%d/orders", plain), `{"quantity":1}`, "Authorization", u7, "Admission-Token", tok), 202)
	if a := l.do(t, "GET", path, "", adm...); a.body["orders_accepted"] != 1.0 {
		t.Fatalf("orders accepted %v: want 1 (the refused ones made none)", a.body["orders_accepted"])
	}
}

// In a group buy with a waiting room, opening a group and joining one need
// the Admission-Token too.
func TestQueue_liveAPI_groupBuy_openAndJoinNeedAdmission(t *testing.T) {
	l := startLiveAPI(t)
	adm := []string{"Authorization", "Bearer " + token}
	a := l.do(t, "POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"groupbuy","name":"Pot","sku":"G1","price_cents":500,
		"total_stock":30,"per_user_limit":1,"group_size":2,"group_ttl_seconds":600,"starts_at":%q,"ends_at":%q,
		"waiting_room":true,"admit_per_second":1000}`, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), adm...)
	want(t, "create", a, 201)
	gb := int64(a.body["id"].(float64))
	want(t, "publish", l.do(t, "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", gb), "", adm...), 200)
	queue, groups := fmt.Sprintf("/v1/activities/%d/queue", gb), fmt.Sprintf("/v1/activities/%d/groups", gb)
	u7, u8 := l.bearer(t, 7), l.bearer(t, 8)
	want(t, "open without a token", l.do(t, "POST", groups, `{"quantity":1}`, "Authorization", u7), 403, "NOT_ADMITTED")
	want(t, "join the queue", l.do(t, "POST", queue, "", "Authorization", u7), 200)
	var place answer
	for range 50 {
		if place = l.do(t, "GET", queue, "", "Authorization", u7); place.str("status") == "admitted" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	open := l.do(t, "POST", groups, `{"quantity":1}`, "Authorization", u7, "Admission-Token", place.str("admission_token"))
	want(t, "open with the token", open, 202)
	join := fmt.Sprintf("/v1/groups/%s/join", open.str("group_id"))
	want(t, "join a group without a token", l.do(t, "POST", join, `{"quantity":1}`, "Authorization", u8), 403, "NOT_ADMITTED")
	want(t, "join a group with another user's token", l.do(t, "POST", join, `{"quantity":1}`, "Authorization", u8,
		"Admission-Token", place.str("admission_token")), 403, "NOT_ADMITTED")
}
