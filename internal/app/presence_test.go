package app_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

// Shoppers' apps (a token) and devices (an id) send heartbeats, optionally
// naming the sale they watch; the admin API says how many are online, how
// many watch the sale, and whether one user or device is, with its last
// heartbeat. A heartbeat with neither a token nor a device id, a bad token,
// both a token and a device id, or naming an activity that does not exist,
// is refused and counts nothing.
func TestPresence_heartbeatsCountedAndAskedAbout(t *testing.T) {
	s := newStack(t, "")
	act := s.sale(10, 1, 900)
	beat := func(auth, body string) reply { return s.call("POST", "/v1/presence", auth, body) }
	if r := beat(s.bearer(1), fmt.Sprintf(`{"activity_id":%d}`, act)); r.code != 200 || r.body["ttl_seconds"] != float64(300) {
		t.Fatalf("a user's heartbeat: %d %v", r.code, r.body)
	}
	if r := beat("", fmt.Sprintf(`{"device_id":"kiosk-7","activity_id":%d}`, act)); r.code != 200 {
		t.Fatalf("a device's heartbeat: %d %v", r.code, r.body)
	}
	if r := beat(s.bearer(2), `{}`); r.code != 200 {
		t.Fatalf("a user's heartbeat watching nothing: %d %v", r.code, r.body)
	}
	for name, tc := range map[string]struct {
		auth, body, code string
	}{
		"no token, no device":  {"", `{}`, "INVALID_ARGUMENT"},
		"a bad device id":      {"", `{"device_id":"a b"}`, "INVALID_ARGUMENT"},
		"a forged token":       {"Bearer nope", `{}`, "UNAUTHENTICATED"},
		"a token and a device": {s.bearer(3), `{"device_id":"x"}`, "INVALID_ARGUMENT"},
		"an unknown field":     {s.bearer(3), `{"watching":1}`, "INVALID_ARGUMENT"},
		"a made-up activity":   {"", `{"device_id":"kiosk-9","activity_id":999999}`, "NOT_FOUND"},
	} {
		if r := beat(tc.auth, tc.body); r.errCode() != tc.code {
			t.Errorf("%s: %d %v, want %s", name, r.code, r.body, tc.code)
		}
	}
	r := s.admin("GET", fmt.Sprintf("/admin/v1/presence?activity_id=%d&user_id=1", act), "")
	activity, _ := r.body["activity"].(map[string]any)
	client, _ := r.body["client"].(map[string]any)
	if r.code != 200 || r.body["online"] != float64(3) || activity["watching"] != float64(2) || client["online"] != true || client["last_seen"] == nil {
		t.Fatalf("presence: %d %v; want 3 online, 2 watching, user 1 online", r.code, r.body)
	}
	if r := s.admin("GET", "/admin/v1/presence?device_id=kiosk-7", ""); r.body["client"].(map[string]any)["online"] != true {
		t.Fatalf("the device: %v", r.body)
	}
	if r := s.admin("GET", "/admin/v1/presence?user_id=99", ""); r.body["client"].(map[string]any)["online"] != false {
		t.Fatalf("a user never seen: %v", r.body)
	}
	if r := s.admin("GET", "/admin/v1/presence?user_id=x", ""); r.errCode() != "INVALID_ARGUMENT" {
		t.Fatalf("a bad user id: %d %v", r.code, r.body)
	}
}

// Heartbeats are rate limited like the rest of /v1. A user's spend the
// user's budget (RATE_LIMIT_USER_RPS); a device's, with no token, its
// network's share of it; and both the per-IP limit (RATE_LIMIT_IP_RPS).
// Over a limit: 429 RATE_LIMITED with Retry-After, and the heartbeat
// records nothing — a device refused is not online.
func TestPresence_heartbeatsOverTheRateLimit_answer429AndCountNothing(t *testing.T) {
	for _, tc := range []struct{ name, userRPS, ipRPS string }{
		{"per-user limit", "3", "0"},
		{"per-IP limit", "0", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStackWith(t, "", map[string]string{"RATE_LIMIT_USER_RPS": tc.userRPS, "RATE_LIMIT_IP_RPS": tc.ipRPS})
			// 20 quick heartbeats at 3 a second: 3 in the burst, and one
			// more a third of a second while they go on.
			burst := func(what string, auth func(i int) string, body func(i int) string) []bool {
				t.Helper()
				var ok []bool
				limited := 0
				for i := range 20 {
					r := s.call("POST", "/v1/presence", auth(i), body(i))
					switch {
					case r.code == 200:
					case r.code == 429 && r.errCode() == "RATE_LIMITED" && r.header.Get("Retry-After") != "":
						limited++
					default:
						t.Fatalf("%s, heartbeat %d: %d %v (Retry-After %q)", what, i, r.code, r.body, r.header.Get("Retry-After"))
					}
					ok = append(ok, r.code == 200)
				}
				if limited < 8 || limited > 17 {
					t.Fatalf("%s: %d of 20 quick heartbeats limited at 3 a second", what, limited)
				}
				return ok
			}
			if tc.userRPS != "0" {
				burst("one user", func(int) string { return s.bearer(1) }, func(int) string { return `{}` })
				if r := s.call("POST", "/v1/presence", s.bearer(2), `{}`); r.code != 200 {
					t.Fatalf("another user is limited by the first: %d %v", r.code, r.body)
				}
			} else {
				burst("users on one IP", func(i int) string { return s.bearer(int64(i + 1)) }, func(int) string { return `{}` })
			}
			// Devices on one network, each once, once the budget is back.
			time.Sleep(1200 * time.Millisecond)
			ok := burst("devices on one IP", func(int) string { return "" }, func(i int) string { return fmt.Sprintf(`{"device_id":"kiosk-%d"}`, i) })
			for i, accepted := range ok {
				r := s.admin("GET", fmt.Sprintf("/admin/v1/presence?device_id=kiosk-%d", i), "")
				if on := r.body["client"].(map[string]any)["online"]; on != accepted {
					t.Fatalf("kiosk-%d: heartbeat accepted %v, online %v", i, accepted, on)
				}
			}
		})
	}
}

// The admin API says who holds a lock (a short owner id, the fence, the
// holder's host and pid) and how long the order waiting longest for MySQL
// has waited.
func TestAdmin_lockHolderAndPersistenceLag(t *testing.T) {
	s := newStack(t, "")
	locks := lock.New(s.rdb())
	t.Cleanup(func() { locks.Close() })
	ctx := context.Background()
	held, err := locks.Obtain(ctx, "order:1-0CF3YH0AB7J8Q2RS", 10*time.Second, lock.WithLabel("inspected"))
	if err != nil {
		t.Fatal(err)
	}
	r := s.admin("GET", "/admin/v1/locks/order:1-0CF3YH0AB7J8Q2RS", "")
	if r.code != 200 || r.body["fence"] != float64(held.Fence()) || r.body["pid"] != float64(os.Getpid()) ||
		r.body["label"] != "inspected" || len(r.str("owner")) != 8 {
		t.Fatalf("a held lock: %d %v", r.code, r.body)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := s.admin("GET", "/admin/v1/locks/order:1-0CF3YH0AB7J8Q2RS", ""); r.code != 404 {
		t.Fatalf("a released lock: %d %v", r.code, r.body)
	}

	act := s.sale(10, 1, 900)
	path := fmt.Sprintf("/admin/v1/activities/%d", act)
	if r := s.admin("GET", path, ""); r.body["persistence_lag_ms"] != float64(0) {
		t.Fatalf("nothing waits for MySQL yet: %v", r.body)
	}
	if r := s.order(1, act, 1); r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	time.Sleep(1200 * time.Millisecond) // no worker: the order waits
	if lag, _ := s.admin("GET", path, "").body["persistence_lag_ms"].(float64); lag < 1000 {
		t.Fatalf("an order unrecorded for 1.2 s: lag %v ms", lag)
	}
	s.worker()
	deadline := time.Now().Add(30 * time.Second)
	for s.admin("GET", path, "").body["persistence_lag_ms"] != float64(0) {
		if time.Now().After(deadline) {
			t.Fatal("the lag never went back to 0 with a worker running")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
