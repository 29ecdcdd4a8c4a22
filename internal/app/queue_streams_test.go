package app_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// roomSale creates and publishes a running flash sale with a waiting room
// admitting rate a second.
func (s *stack) roomSale(stock, rate int) int64 {
	s.t.Helper()
	id, _ := s.publishedSale(stock, 1, 600, fmt.Sprintf(`,"waiting_room":true,"admit_per_second":%d`, rate))
	return id
}

// joinQueue joins users to sale's queue in order.
func (s *stack) joinQueue(sale int64, users ...int64) {
	s.t.Helper()
	for _, u := range users {
		if r := s.call("POST", fmt.Sprintf("/v1/activities/%d/queue", sale), s.bearer(u), ""); r.code != 200 {
			s.t.Fatalf("join as %d: %d %v", u, r.code, r.body)
		}
	}
}

// queueEvent is a queue stream's event, decoded.
type queueEvent struct {
	Status         string     `json:"status"`
	Position       *int64     `json:"position"`
	Wait           *int64     `json:"estimated_wait_seconds"`
	PollAfter      int64      `json:"poll_after_seconds"`
	AdmissionToken string     `json:"admission_token"`
	AdmittedUntil  *time.Time `json:"admitted_until"`
}

func decodeQueue(t *testing.T, ev sseEvent) queueEvent {
	t.Helper()
	if ev.name != "queue" {
		t.Fatalf("event %+v, want queue", ev)
	}
	var q queueEvent
	if err := json.Unmarshal([]byte(ev.data), &q); err != nil {
		t.Fatalf("event data %q: %v", ev.data, err)
	}
	return q
}

// endedAfterAny waits for the stream's clean end within d, whatever
// events come before it.
func (c *sseConn) endedAfterAny(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case _, ok := <-c.events:
			if !ok {
				if err := <-c.end; err != nil {
					t.Fatalf("the stream ended with %v, want a clean end", err)
				}
				return
			}
		case <-timeout:
			t.Fatalf("the stream did not end within %v", d)
		}
	}
}

func queuePath(sale int64) string { return fmt.Sprintf("/v1/activities/%d/queue/events", sale) }

// A waiting shopper's stream: their place at connect (as GET .../queue
// answers it), then, with nobody polling, their admission with a token
// that places an order; the stream ends after it. One already admitted
// gets the admission and the end at once.
func TestQueueStream_waitingPlace_thenAdmission_withoutPolling_thenOrders(t *testing.T) {
	s := newStack(t, "")
	sale := s.roomSale(10, 1) // one a second: user 1 at once, 2 after ~1 s, 3 after ~2 s
	s.joinQueue(sale, 1, 2, 3)
	client := streamClient()

	first := s.openSSE(client, 1, queuePath(sale), "")
	if q := decodeQueue(t, first.next(t, 5*time.Second)); q.Status != "admitted" || q.AdmissionToken == "" || q.AdmittedUntil == nil {
		t.Fatalf("user 1's stream: %+v, want admitted with a token", q)
	}
	first.ended(t, 5*time.Second)

	c := s.openSSE(client, 3, queuePath(sale), "")
	q := decodeQueue(t, c.next(t, 5*time.Second))
	if q.Status != "waiting" || q.Position == nil || *q.Position < 1 || *q.Position > 2 || q.Wait == nil || *q.Wait < 1 || q.PollAfter < 1 {
		t.Fatalf("at connect: %+v, want waiting at position 1..2 with its estimate", q)
	}
	opened := time.Now()
	var last queueEvent
	for last.Status != "admitted" {
		last = decodeQueue(t, c.next(t, 5*time.Second))
		if last.Status == "waiting" && (last.Position == nil || *last.Position < 1 || *last.Position > *q.Position) {
			t.Fatalf("a waiting update %+v after position %d: want a smaller one, at least 1", last, *q.Position)
		}
		if last.Status != "waiting" && last.Status != "admitted" {
			t.Fatalf("update %+v", last)
		}
	}
	if d := time.Since(opened); d > 4*time.Second {
		t.Fatalf("admitted after %v at 1 a second from position %d", d, *q.Position)
	}
	if last.AdmissionToken == "" || last.AdmittedUntil == nil || time.Until(*last.AdmittedUntil) < 200*time.Second {
		t.Fatalf("admitted: %+v, want a token good for ~300 s", last)
	}
	c.ended(t, 5*time.Second)
	if r := s.order(3, sale, 1, "Admission-Token", last.AdmissionToken); r.code != 202 {
		t.Fatalf("order with the streamed token: %d %v", r.code, r.body)
	}
	// The same place as polling answers: admitted, the same token.
	if r := s.call("GET", fmt.Sprintf("/v1/activities/%d/queue", sale), s.bearer(3), ""); r.str("admission_token") != last.AdmissionToken {
		t.Fatalf("GET .../queue after the stream: %v", r.body)
	}
}

// Opening a stream: the errors of GET .../queue, before any byte of a
// stream.
func TestQueueStream_badRequests_refusedWithStableCodes(t *testing.T) {
	s := newStack(t, "")
	sale := s.roomSale(10, 1)
	plain := s.sale(10, 1, 600)
	for _, c := range []struct {
		name, path, auth string
		code             int
		err              string
	}{
		{"not joined", queuePath(sale), s.bearer(9), 404, "NOT_IN_QUEUE"},
		{"no waiting room", queuePath(plain), s.bearer(9), 409, "NO_WAITING_ROOM"},
		{"no such sale", queuePath(999999), s.bearer(9), 404, "NOT_FOUND"},
		{"a bad id", "/v1/activities/x/queue/events", s.bearer(9), 400, "INVALID_ARGUMENT"},
		{"unauthenticated", queuePath(sale), "", 401, "UNAUTHENTICATED"},
	} {
		r := s.call("GET", c.path, c.auth, "")
		if r.code != c.code || r.errCode() != c.err {
			t.Errorf("%s: %d %v, want %d %s", c.name, r.code, r.body, c.code, c.err)
		}
	}
}

// A sale that sells out ends every waiting stream with sold_out within a
// tick or so; one that closes, with closed.
func TestQueueStream_soldOutAndClosed_endEveryWaitingStreamPromptly(t *testing.T) {
	s := newStack(t, "")
	client := streamClient()
	for _, end := range []string{"sold_out", "closed"} {
		sale := s.roomSale(1, 1)
		users := []int64{1}
		for u := int64(100); u < 120; u++ {
			users = append(users, u)
		}
		s.joinQueue(sale, users...)
		var conns []*sseConn
		for _, u := range users[2:] { // user 1 admitted, 100 perhaps soon: the rest wait
			c := s.openSSE(client, u, queuePath(sale), "")
			if q := decodeQueue(t, c.next(t, 5*time.Second)); q.Status != "waiting" {
				t.Fatalf("%s: user %d at connect: %+v, want waiting", end, u, q)
			}
			conns = append(conns, c)
		}
		at := time.Now()
		if end == "sold_out" {
			tok := s.call("GET", fmt.Sprintf("/v1/activities/%d/queue", sale), s.bearer(1), "").str("admission_token")
			if r := s.order(1, sale, 1, "Admission-Token", tok); r.code != 202 {
				t.Fatalf("the last unit: %d %v", r.code, r.body)
			}
		} else if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/close", sale), ""); r.code != 200 {
			t.Fatalf("close: %d %v", r.code, r.body)
		}
		for i, c := range conns {
			var q queueEvent
			for q.Status == "" || q.Status == "waiting" {
				q = decodeQueue(t, c.next(t, 3*time.Second))
			}
			if q.Status != end {
				t.Fatalf("stream %d: %+v, want %s", i, q, end)
			}
			c.ended(t, 3*time.Second)
		}
		if d := time.Since(at); d > 1500*time.Millisecond {
			t.Fatalf("%s reached %d streams in %v, want within a tick or two (250 ms each)", end, len(conns), d)
		}
	}
}

// 500 waiting streams on one api: Redis sees a script a tick for their
// sale, nothing per stream, while they wait; the metrics count them; all
// end cleanly at shutdown.
func TestQueueStream_500Streams_idleCostRedisNothingPerClient_endAtShutdown(t *testing.T) {
	s := newStack(t, "")
	sale := s.roomSale(1000, 1)
	const n = 500
	users := make([]int64, 0, n+1)
	for u := int64(1000); u <= 1000+n; u++ {
		users = append(users, u)
	}
	s.joinQueue(sale, users...)
	client := streamClient()
	conns := make([]*sseConn, n)
	for i := range conns {
		conns[i] = s.openSSE(client, users[i+1], queuePath(sale), "")
	}
	for _, c := range conns {
		if q := decodeQueue(t, c.next(t, 10*time.Second)); q.Status != "waiting" && q.Status != "admitted" {
			t.Fatalf("at connect: %+v", q)
		}
	}
	page := scrape(t, s.base+"/metrics")
	if got := sample(page, "flashsale_waitingroom_streams_open"); got < n-5 || got > n {
		t.Fatalf("flashsale_waitingroom_streams_open %v, want ~%d", got, n)
	}
	if got := sample(page, "flashsale_stream_shard_subscriptions_total"); got != 8 {
		t.Fatalf("flashsale_stream_shard_subscriptions_total %v, want 8", got)
	}

	rdb := s.rdb()
	before := commandCalls(t, rdb)
	time.Sleep(3 * time.Second)
	after := commandCalls(t, rdb)
	total := int64(0)
	for cmd, k := range after {
		if d := k - before[cmd]; d != 0 && cmd != "info" {
			t.Logf("%d %s in 3 s with %d waiting streams", d, cmd, n)
			total += d
		}
	}
	// 12 ticks of the sale's counters in 3 s (one EVALSHA each, a dozen
	// commands inside), the few admitted meanwhile (one a second: one Read
	// each), the process's background. Anything per stream would be ≥ 500
	// calls of something.
	if d := after["evalsha"] - before["evalsha"]; d > 20 {
		t.Fatalf("%d EVALSHA in 3 s while %d streams waited, want ≤ 20 (one a tick for the sale, one an admission)", d, n)
	}
	if total > 300 {
		t.Fatalf("%d commands in 3 s while %d streams waited, want well under one per stream", total, n)
	}

	done := make(chan error, 1)
	go func() { done <- s.api.Close() }()
	for _, c := range conns {
		c.endedAfterAny(t, 10*time.Second) // position updates may still come first
	}
	if err := <-done; err != nil {
		t.Fatalf("api close: %v", err)
	}
}
