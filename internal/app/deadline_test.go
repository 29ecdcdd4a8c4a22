package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// requestTimeout is REQUEST_TIMEOUT in the frozen-Redis test, and
// frozenMargin what an answer may take beyond it: the handler's way out
// once its context ended (a lock's release, a follow-up, may take up to
// order.FollowUpGrace past the deadline, but here none was taken), writing
// the answer, and the scheduling of -race builds on a loaded 2-core machine.
const (
	requestTimeout = time.Second
	frozenMargin   = time.Second
)

// A Redis primary frozen (SIGSTOP: its connections stay open and nothing
// answers, as a stalled host or a partition looks to a client) while
// shoppers order, pay, cancel and open groups and an admin publishes and
// closes: every request is answered 503 with Retry-After within
// REQUEST_TIMEOUT and a margin — not after go-redis's read timeout and
// retries — saying that Redis did not answer, and naming the
// Idempotency-Key only where the route takes one; once Redis runs again
// the same requests succeed. The api is a process of its own.
func TestOrders_redisFrozen_every503WithinRequestTimeout_thenBack(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"REQUEST_TIMEOUT": requestTimeout.String(), "API_PROCESS": "1"})
	s.workerProcess(t.Name())
	act := s.sale(1000, 1, 900)
	gb := s.groupBuy(100, 1, 3, 600, 900)
	draft, closing := s.draft(), s.sale(10, 1, 900)
	toPay, toCancel := s.order(1, act, 1), s.order(2, act, 1)
	if toPay.code != 202 || toCancel.code != 202 {
		t.Fatalf("with Redis running: %d %v, %d %v", toPay.code, toPay.body, toCancel.code, toCancel.body)
	}
	type req struct {
		what, method, path, body, key string
		user                          int64
	}
	reqs := []req{
		{"a pay", "POST", "/v1/orders/" + toPay.str("order_no") + "/pay", "", "", 1},
		{"a cancel", "POST", "/v1/orders/" + toCancel.str("order_no") + "/cancel", "", "", 2},
		{"a group opened", "POST", fmt.Sprintf("/v1/activities/%d/groups", gb), `{"quantity":1}`, "open-30", 30},
		{"a publish", "POST", fmt.Sprintf("/admin/v1/activities/%d/publish", draft), "", "", 0},
		{"a close", "POST", fmt.Sprintf("/admin/v1/activities/%d/close", closing), "", "", 0},
	}
	for u := int64(10); u < 16; u++ {
		reqs = append(reqs, req{fmt.Sprintf("user %d's order", u), "POST", fmt.Sprintf("/v1/activities/%d/orders", act),
			`{"quantity":1}`, fmt.Sprintf("tap-%d", u), u})
	}
	send := func(r req) (int, string, string, time.Duration) {
		hr, _ := http.NewRequest(r.method, s.base+r.path, strings.NewReader(r.body))
		hr.Header.Set("Authorization", "Bearer "+adminToken)
		if r.user != 0 {
			hr.Header.Set("Authorization", s.bearer(r.user))
		}
		if r.key != "" {
			hr.Header.Set("Idempotency-Key", r.key)
		}
		start := time.Now()
		resp, err := s.client.Do(hr)
		if err != nil {
			return 0, err.Error(), "", time.Since(start)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(raw), resp.Header.Get("Retry-After"), time.Since(start)
	}

	frozenSays := fmt.Sprintf("Redis did not answer within REQUEST_TIMEOUT (%v); try again", requestTimeout)
	s.redis.Pause()
	frozen := true
	defer func() {
		if frozen {
			s.redis.Resume()
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body, retryAfter, took := send(r)
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
			if code != 503 || !strings.Contains(body, "UNAVAILABLE") || retryAfter == "" {
				t.Errorf("%s with Redis frozen: %d %s (Retry-After %q) after %v", r.what, code, body, retryAfter, took)
			}
			// The message names what did not answer, and the
			// Idempotency-Key only where the route takes one.
			var answer struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &answer)
			msg := answer.Error.Message
			if !strings.HasPrefix(msg, frozenSays) || strings.Contains(msg, "Idempotency-Key") != (r.key != "") {
				t.Errorf("%s with Redis frozen says %q: want %q first, and the Idempotency-Key only if the route takes one",
					r.what, msg, frozenSays)
			}
			if took > requestTimeout+frozenMargin {
				t.Errorf("%s with Redis frozen answered after %v: want REQUEST_TIMEOUT %v and at most %v more", r.what, took, requestTimeout, frozenMargin)
			}
		}()
	}
	wg.Wait()
	t.Logf("with Redis frozen, %d requests answered 503, the slowest after %v (REQUEST_TIMEOUT %v)", len(reqs), slowest.Round(time.Millisecond), requestTimeout)
	if t.Failed() {
		t.FailNow()
	}

	s.redis.Resume()
	frozen = false
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range reqs {
		resp, raw := s.retrying(deadline, func() (*http.Response, []byte) {
			code, body, _, _ := send(r)
			return &http.Response{StatusCode: code}, []byte(body)
		})
		// A pay or cancel answered 503 may have landed before the freeze
		// cut its answer off: the app reads the order then (below).
		if resp.StatusCode >= 300 && !(resp.StatusCode == 409 && (r.what == "a pay" || r.what == "a cancel")) {
			t.Fatalf("%s with Redis running again: %d %s", r.what, resp.StatusCode, raw)
		}
	}
	for no, want := range map[string]string{toPay.str("order_no"): "paid", toCancel.str("order_no"): "cancelled"} {
		user := int64(1)
		if want == "cancelled" {
			user = 2
		}
		if r := s.call("GET", "/v1/orders/"+no, s.bearer(user), ""); r.str("status") != want {
			t.Fatalf("order %s after the retries: %v, want %s", no, r.body, want)
		}
	}
	s.checkInvariants(act, 8)
}
