package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// replicaDownAckTimeout is REDIS_ACK_TIMEOUT in the replica-down test, and
// replicaDownMargin what an answer may take beyond it: one more ack
// timeout when the request's script is the first of its kind on that
// server (redispipe: NOSCRIPT, the script loaded and the call sent again
// in a pipeline with its own WAIT — the first pay and the first join here
// took 620–680 ms), plus 900 ms for the request's other round trips (a
// lock, the order read back, MySQL's transaction for an admin change) and
// the scheduling of -race builds of api, worker and test on a loaded
// 2-core machine. Without the WAIT's timeout a request would hang on for
// go-redis's read timeout (5 s) or REQUEST_TIMEOUT (3 s).
const (
	replicaDownAckTimeout = 300 * time.Millisecond
	replicaDownMargin     = replicaDownAckTimeout + 900*time.Millisecond
)

// With REDIS_ACK_REPLICAS=1 and the replica down, nothing is reported
// done: an order, a group opened, a place joined, a pay, a cancel, an
// admin's publish and close each answer 503 with Retry-After, within the
// ack timeout and a margin, never a success; and none of the shoppers'
// changes reaches MySQL. Once the replica is back the same requests
// succeed, those with an Idempotency-Key getting what the primary kept.
// The api and the worker are processes of their own.
func TestFailover_replicaDown_everyChange503_thenBack(t *testing.T) {
	waits(t)
	s := newStackWith(t, "", map[string]string{"REDIS_SENTINEL": "1", "REDIS_ACK_REPLICAS": "1",
		"REDIS_ACK_TIMEOUT": replicaDownAckTimeout.String(), "API_PROCESS": "1"})
	s.workerProcess(t.Name())
	act := s.sale(1000, 2, 900)
	gb := s.groupBuy(100, 1, 3, 600, 900)
	draft := s.draft()
	closing := s.sale(10, 1, 900)

	// With the replica up: an order to pay, one to cancel, a group to join.
	first, toCancel, opened := s.order(1, act, 1), s.order(3, act, 1), s.open(20, gb)
	for _, r := range []reply{first, toCancel, opened} {
		if r.code != 202 {
			t.Fatalf("with the replica up: %d %v", r.code, r.body)
		}
	}
	gid := opened.str("group_id")
	s.waitMySQL(3, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE user_id IN (1, 3, 20)")
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE group_id = ?", gid)

	s.sg.Replicas[0].Kill()
	changes := []struct {
		what, method, path string
		user               int64
		body, key          string
	}{
		{"an order", "POST", fmt.Sprintf("/v1/activities/%d/orders", act), 2, `{"quantity":1}`, "tap-2"},
		{"the order again", "POST", fmt.Sprintf("/v1/activities/%d/orders", act), 2, `{"quantity":1}`, "tap-2"},
		{"a group opened", "POST", fmt.Sprintf("/v1/activities/%d/groups", gb), 22, `{"quantity":1}`, "open-22"},
		{"a place joined", "POST", "/v1/groups/" + gid + "/join", 21, `{"quantity":1}`, "join-21"},
		{"a pay", "POST", "/v1/orders/" + first.str("order_no") + "/pay", 1, "", ""},
		{"a cancel", "POST", "/v1/orders/" + toCancel.str("order_no") + "/cancel", 3, "", ""},
		{"a publish", "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", draft), 0, "", ""},
		{"a close", "POST", fmt.Sprintf("/admin/v1/activities/%d/close", closing), 0, "", ""},
	}
	send := func(method, path string, user int64, body, key string) (*http.Response, []byte, time.Duration) {
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if user != 0 {
			req.Header.Set("Authorization", s.bearer(user))
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		start := time.Now()
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, raw, time.Since(start)
	}
	var slowest time.Duration
	var took []string
	for _, c := range changes {
		resp, raw, d := send(c.method, c.path, c.user, c.body, c.key)
		if resp.StatusCode != 503 || !strings.Contains(string(raw), "UNAVAILABLE") || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s with the replica down: %d %s (Retry-After %q)", c.what, resp.StatusCode, raw, resp.Header.Get("Retry-After"))
		}
		if d > replicaDownAckTimeout+replicaDownMargin {
			t.Fatalf("%s took %v with the replica down: want the %v ack timeout and at most %v more", c.what, d, replicaDownAckTimeout, replicaDownMargin)
		}
		slowest = max(slowest, d)
		took = append(took, fmt.Sprintf("%s %v", c.what, d.Round(time.Millisecond)))
	}
	t.Logf("with the replica down every change answered 503 (ack timeout %v): %s", replicaDownAckTimeout, strings.Join(took, ", "))

	// Nothing unacknowledged reaches MySQL: the changes are on the primary
	// (the orders on its outbox too, which the reconciler scans after 5 s),
	// but while no replica holds them the worker writes none of them. (An
	// admin's publish and close are recorded in MySQL first by design and
	// then loaded into Redis; their 503 says the load is not confirmed, and
	// repeating them repairs it.)
	time.Sleep(7 * time.Second)
	for _, q := range []struct {
		query string
		args  []any
	}{
		{"SELECT COUNT(*) FROM orders WHERE user_id IN (2, 21, 22)", nil},
		{"SELECT COUNT(*) FROM `groups` WHERE leader_user_id = 22", nil},
		{"SELECT COUNT(*) FROM orders WHERE order_no IN (?, ?) AND status <> 'pending_payment'",
			[]any{first.str("order_no"), toCancel.str("order_no")}},
	} {
		if n := s.count(q.query, q.args...); n != 0 {
			t.Fatalf("a change no replica holds reached MySQL: %s %v = %d", q.query, q.args, n)
		}
	}

	s.sg.Replicas[0].Restart()
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range changes {
		resp, raw := s.retrying(deadline, func() (*http.Response, []byte) {
			resp, raw, _ := send(c.method, c.path, c.user, c.body, c.key)
			return resp, raw
		})
		switch {
		case resp.StatusCode < 300:
		case resp.StatusCode == 409 && (c.what == "a pay" || c.what == "a cancel"):
			// The attempt answered 503 had landed on the primary; the app
			// reads the order (below).
		default:
			t.Fatalf("%s with the replica back: %d %s", c.what, resp.StatusCode, raw)
		}
	}
	// The primary kept what the 503 attempts did: the retries with their
	// keys return it, and nobody holds two.
	rdb := s.rdb()
	if n := rdb.HGet(context.Background(), rediskeys.For(act).Users, "2").Val(); n != "1" {
		t.Fatalf("user 2 holds %q units after four attempts with one key", n)
	}
	for user, status := range map[int64]string{1: "paid", 3: "cancelled"} {
		no := first.str("order_no")
		if user == 3 {
			no = toCancel.str("order_no")
		}
		if r := s.call("GET", "/v1/orders/"+no, s.bearer(user), ""); r.str("status") != status {
			t.Fatalf("user %d's order after the retries: %v, want %s", user, r.body, status)
		}
	}
	if r := s.order(4, draft, 1); r.code != 202 {
		t.Fatalf("an order on the sale published again: %d %v", r.code, r.body)
	}
	if r := s.order(4, closing, 1); r.code != 409 {
		t.Fatalf("an order on the sale closed again: %d %v", r.code, r.body)
	}
	s.checkInvariants(act, 3)
	s.checkInvariants(gb, 3)
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE leader_user_id = 22")
}

// draft creates a running flash sale left unpublished and returns its id.
func (s *stack) draft() int64 {
	s.t.Helper()
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := s.admin("POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"seckill","name":"draft","sku":"D",
		"price_cents":500,"total_stock":10,"per_user_limit":1,"starts_at":%q,"ends_at":%q}`, start, end))
	if r.code != 201 {
		s.t.Fatalf("create activity: %d %v", r.code, r.body)
	}
	return int64(r.body["id"].(float64))
}

// retrying sends until an answer that is not 5xx, or deadline, waiting
// 200 ms between attempts as a client honouring Retry-After would (capped).
func (s *stack) retrying(deadline time.Time, send func() (*http.Response, []byte)) (*http.Response, []byte) {
	for {
		resp, raw := send()
		if resp.StatusCode != 0 && resp.StatusCode < 500 || time.Now().After(deadline) {
			return resp, raw
		}
		time.Sleep(200 * time.Millisecond)
	}
}
