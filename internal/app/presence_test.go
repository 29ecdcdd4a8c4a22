package app_test

import (
	"fmt"
	"testing"
)

// Shoppers' apps (a token) and devices (an id) send heartbeats, optionally
// naming the sale they watch; the admin API says how many are online, how
// many watch the sale, and whether one user or device is, with its last
// heartbeat. A heartbeat with neither a token nor a device id, a bad token,
// or both a token and a device id, is refused and counts nothing.
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
