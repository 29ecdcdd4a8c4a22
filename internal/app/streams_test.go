package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/webhook"
)

// sseEvent is one event a stream sent (name ":" for a comment line).
type sseEvent struct{ id, name, data string }

// sseConn is an open order stream.
type sseConn struct {
	resp   *http.Response
	events chan sseEvent
	end    chan error // the body's end: nil for a clean end, else the read's error
}

// openStream opens GET /v1/orders/{no}/events as user, from last
// (Last-Event-ID; "" for none), on its own connection.
func (s *stack) openStream(client *http.Client, user int64, no, last string) *sseConn {
	s.t.Helper()
	return s.openSSE(client, user, "/v1/orders/"+no+"/events", last)
}

// openSSE opens the stream at path as user, from last (Last-Event-ID; ""
// for none), on its own connection.
func (s *stack) openSSE(client *http.Client, user int64, path, last string) *sseConn {
	s.t.Helper()
	no := path
	req, _ := http.NewRequest("GET", s.base+path, nil)
	req.Header.Set("Authorization", s.bearer(user))
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatalf("open stream of %s: %v", no, err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.t.Fatalf("open stream of %s: %d %s %s", no, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	c := &sseConn{resp: resp, events: make(chan sseEvent, 64), end: make(chan error, 1)}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				c.events <- sseEvent{name: ":"}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
		c.end <- sc.Err()
	}()
	s.t.Cleanup(func() { resp.Body.Close() })
	return c
}

// next is the stream's next event (comments skipped) within d.
func (c *sseConn) next(t *testing.T, d time.Duration) sseEvent {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("the stream ended (%v) waiting for an event", <-c.end)
			}
			if ev.name != ":" {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event within %v", d)
		}
	}
}

// ended waits for the stream's clean end (the response complete, no
// more events) within d.
func (c *sseConn) ended(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				if err := <-c.end; err != nil {
					t.Fatalf("the stream ended with %v, want a clean end", err)
				}
				return
			}
			if ev.name != ":" {
				t.Fatalf("an event %+v where the stream should end", ev)
			}
		case <-timeout:
			t.Fatalf("the stream did not end within %v", d)
		}
	}
}

// expect checks an event's name and id and that its data is its order's.
func expect(t *testing.T, ev sseEvent, name, id, no string) {
	t.Helper()
	if ev.name != name || ev.id != id || !strings.Contains(ev.data, `"order_no":"`+no+`"`) && !strings.Contains(ev.data, no) {
		t.Fatalf("got %+v, want %s id %s of %s", ev, name, id, no)
	}
}

// eventSource is what the worker does after its batch's commit: the events
// in the outbox (MySQL), then published.
type eventSource struct {
	t      *testing.T
	outbox *mysqlstore.Webhooks
	pub    *stream.Publisher
}

func (s *stack) eventSource() *eventSource {
	db, err := connect.MySQL(s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	return &eventSource{t: s.t, outbox: mysqlstore.NewWebhooks(db), pub: stream.NewPublisher(s.rdb())}
}

// commit appends events to the outbox and publishes them; a publish's
// error is returned (the events are committed either way).
func (e *eventSource) commit(events ...webhook.Event) error {
	e.t.Helper()
	if err := e.outbox.Append(context.Background(), events...); err != nil {
		e.t.Fatal(err)
	}
	return e.pub.Publish(context.Background(), events)
}

// orderOfReply is the order a 202's body describes.
func orderOfReply(t *testing.T, r reply, user int64) order.Order {
	t.Helper()
	if r.code != 202 && r.code != 200 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	created, _ := time.Parse(time.RFC3339Nano, r.str("created_at"))
	return order.Order{No: r.str("order_no"), ActivityID: int64(r.body["activity_id"].(float64)), UserID: user,
		Quantity: int(r.body["quantity"].(float64)), AmountCents: int64(r.body["amount_cents"].(float64)),
		Status: order.PendingPayment, CreatedAt: created, GroupID: r.str("group_id")}
}

// groupOrder opens a group as user and returns its order, as GET reads it.
func (s *stack) groupOrder(user, act int64) order.Order {
	s.t.Helper()
	r := s.open(user, act)
	if r.code != 202 {
		s.t.Fatalf("open group: %d %v", r.code, r.body)
	}
	return orderOfReply(s.t, s.call("GET", "/v1/orders/"+r.str("order_no"), s.bearer(user), ""), user)
}

// orderEvents is webhook.OrderEvents of o moved to status at at.
func orderEvents(o order.Order, status order.Status, at time.Time) []webhook.Event {
	o.Status = status
	switch status {
	case order.Paid, order.Refunded:
		o.PaidAt, o.PaymentID = at, "pi_test"
	case order.Cancelled:
		o.CancelledAt = at
	}
	return webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "E2E", Currency: "usd", RefundedAt: at.Add(time.Millisecond)})
}

func streamClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000, MaxConnsPerHost: 2000}}
}

// An order's stream: accepted from the order's Redis record at once (not
// yet persisted), then its changes as they are committed and published,
// in order; a group member's paid order stays open until its group is
// decided and ends after its refund.
func TestOrderStream_liveEventsInOrder_untilFinal(t *testing.T) {
	s := newStack(t, "")
	act := s.groupBuy(10, 1, 3, 600, 600)
	o := s.groupOrder(1, act)
	src := s.eventSource()
	c := s.openStream(streamClient(), 1, o.No, "")
	expect(t, c.next(t, 5*time.Second), "order.accepted", "1.0", o.No)

	now := time.Now()
	paid := orderEvents(o, order.Paid, now)
	if err := src.commit(paid...); err != nil { // accepted again (the worker's), and paid
		t.Fatal(err)
	}
	expect(t, c.next(t, 5*time.Second), "order.paid", "2.0", o.No)
	g, _ := webhook.GroupEvent(order.Group{ID: o.GroupID, ActivityID: act, Size: 3, Status: order.GroupStatus("failed"),
		MemberOrders: map[int64]string{1: o.No}}, now.Add(time.Second))
	if err := src.commit(g); err != nil {
		t.Fatal(err)
	}
	expect(t, c.next(t, 5*time.Second), "group.failed", "2.1", o.GroupID)
	refunded := orderEvents(o, order.Refunded, now.Add(2*time.Second))
	if err := src.commit(refunded...); err != nil {
		t.Fatal(err)
	}
	ev := c.next(t, 5*time.Second)
	expect(t, ev, "order.refunded", "3.1", o.No)
	if ev.data != string(refunded[2].Body) {
		t.Fatalf("data %s, want the webhook's body %s", ev.data, refunded[2].Body)
	}
	c.ended(t, 5*time.Second)
}

// Reconnecting with Last-Event-ID: the events committed while away are
// sent (from the outbox), none the client holds is sent again.
func TestOrderStream_lastEventID_missesNoneRepeatsNone(t *testing.T) {
	s := newStack(t, "")
	act := s.groupBuy(10, 1, 3, 600, 600)
	o := s.groupOrder(2, act)
	src := s.eventSource()
	client := streamClient()
	c := s.openStream(client, 2, o.No, "")
	expect(t, c.next(t, 5*time.Second), "order.accepted", "1.0", o.No)
	c.resp.Body.Close() // gone

	now := time.Now()
	_ = src.commit(orderEvents(o, order.Paid, now)...) // while away; its publish reaches nobody
	c2 := s.openStream(client, 2, o.No, "1.0")
	expect(t, c2.next(t, 5*time.Second), "order.paid", "2.0", o.No)
	g, _ := webhook.GroupEvent(order.Group{ID: o.GroupID, ActivityID: act, Size: 3, Status: order.GroupStatus("succeeded"),
		MemberOrders: map[int64]string{2: o.No}}, now.Add(time.Second))
	_ = src.commit(orderEvents(o, order.Paid, now)...) // the worker's same events again: no repeat
	_ = src.commit(g)
	expect(t, c2.next(t, 5*time.Second), "group.succeeded", "2.1", o.GroupID)
	c2.ended(t, 5*time.Second) // paid and the group decided: final

	// A client that holds everything gets nothing again, and the end.
	c3 := s.openStream(client, 2, o.No, "2.1")
	c3.ended(t, 5*time.Second)
	// A client holding only accepted gets the rest, in order.
	c4 := s.openStream(client, 2, o.No, "1")
	expect(t, c4.next(t, 5*time.Second), "order.paid", "2.0", o.No)
	expect(t, c4.next(t, 5*time.Second), "group.succeeded", "2.1", o.GroupID)
	c4.ended(t, 5*time.Second)
}

// Redis killed under open streams: the events committed while it is down
// (their publish fails) reach the streams once the hub has subscribed
// again, from the outbox; events published after it are live again.
func TestOrderStream_redisRestart_losesNothingCurrent(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"REDIS_APPENDFSYNC": "always"})
	act := s.sale(10, 1, 600)
	a := orderOfReply(t, s.order(3, act, 1), 3)
	b := orderOfReply(t, s.order(4, act, 1), 4)
	src := s.eventSource()
	client := streamClient()
	ca := s.openStream(client, 3, a.No, "")
	cb := s.openStream(client, 4, b.No, "")
	expect(t, ca.next(t, 5*time.Second), "order.accepted", "1.0", a.No)
	expect(t, cb.next(t, 5*time.Second), "order.accepted", "1.0", b.No)

	s.redis.Kill()
	if err := src.commit(orderEvents(a, order.Paid, time.Now())...); err == nil {
		t.Fatal("a publish with Redis down succeeded")
	}
	s.redis.Restart()
	expect(t, ca.next(t, 20*time.Second), "order.paid", "2.0", a.No)
	ca.ended(t, 5*time.Second)
	// Live again after the restart.
	deadline := time.Now().Add(20 * time.Second)
	for src.pub.Publish(context.Background(), nil) != nil || src.commit(orderEvents(b, order.Cancelled, time.Now())...) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not take a publish within 20 s of its restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	expect(t, cb.next(t, 5*time.Second), "order.cancelled", "2.0", b.No)
	cb.ended(t, 5*time.Second)
}

// Another user's order is refused as its GET refuses it, a Last-Event-ID
// that is no id of the stream is 400, no token 401: stable codes, no
// stream opened.
func TestOrderStream_badRequests_refusedWithStableCodes(t *testing.T) {
	s := newStack(t, "")
	act := s.sale(10, 1, 600)
	o := orderOfReply(t, s.order(5, act, 1), 5)
	get := s.call("GET", "/v1/orders/"+o.No, s.bearer(6), "")
	ev := s.call("GET", "/v1/orders/"+o.No+"/events", s.bearer(6), "")
	if get.code != 404 || ev.code != get.code || ev.errCode() != get.errCode() {
		t.Fatalf("another user's order: stream %d %v, GET %d %v", ev.code, ev.body, get.code, get.body)
	}
	for _, last := range []string{"x", "1.x", "-1", "1.2.3", "01", "99999999999"} {
		r := s.call("GET", "/v1/orders/"+o.No+"/events", s.bearer(5), "", "Last-Event-ID", last)
		if r.code != 400 || r.errCode() != "INVALID_ARGUMENT" {
			t.Fatalf("Last-Event-ID %q: %d %v, want 400 INVALID_ARGUMENT", last, r.code, r.body)
		}
	}
	if r := s.call("GET", "/v1/orders/"+o.No+"/events", "", ""); r.code != 401 || r.errCode() != "UNAUTHENTICATED" {
		t.Fatalf("no token: %d %v", r.code, r.body)
	}
	get = s.call("GET", "/v1/orders/NOPE", s.bearer(5), "")
	if r := s.call("GET", "/v1/orders/NOPE/events", s.bearer(5), ""); r.code != get.code || r.errCode() != get.errCode() {
		t.Fatalf("a malformed order number: stream %d %v, GET %d %v", r.code, r.body, get.code, get.body)
	}
}

// 1,000 open streams share the api's few subscriptions (one a shard), and
// while idle cost Redis nothing: no command at all in 3 s. The api's
// shutdown then ends every stream cleanly, at once.
func TestOrderStream_thousandStreams_shareSubscriptions_idleFree_endAtShutdown(t *testing.T) {
	s := newStack(t, "")
	act := s.sale(100, 1, 600)
	var orders []order.Order
	for u := int64(100); u < 150; u++ {
		orders = append(orders, orderOfReply(t, s.order(u, act, 1), u))
	}
	client := streamClient()
	conns := make([]*sseConn, 1000)
	for i := range conns {
		o := orders[i%len(orders)]
		conns[i] = s.openStream(client, o.UserID, o.No, "")
	}
	for _, c := range conns {
		c.next(t, 10*time.Second) // accepted: every stream is open and served
	}
	rdb := s.rdb()
	ctx := context.Background()
	for i := range 8 {
		ch := fmt.Sprintf("fs:{stream:%d}", i)
		n, err := rdb.PubSubNumSub(ctx, ch).Result()
		if err != nil || n[ch] != 1 {
			t.Fatalf("channel %s: %d subscribers (%v), want 1 (the api's)", ch, n[ch], err)
		}
	}
	list, _ := rdb.ClientList(ctx).Result()
	// The hub's 8, and the restock watcher's PSUBSCRIBE (stock.WatchRestock).
	if n := subscribers(list); n != 8+1 {
		t.Fatalf("%d pub/sub connections for 1,000 streams, want the hub's 8 and the restock watcher's 1:\n%s", n, list)
	}

	// Idle: Redis sees nothing of the streams. The process's own
	// background (a pub/sub health check's PING every 30 s, the lock
	// library's, go-redis's) may show; anything a stream cost would be
	// ≥ 1,000.
	before := commandCalls(t, rdb)
	time.Sleep(3 * time.Second)
	after := commandCalls(t, rdb)
	total := int64(0)
	for cmd, n := range after {
		if d := n - before[cmd]; d != 0 && cmd != "info" {
			t.Logf("%d %s in 3 s with 1,000 idle streams", d, cmd)
			total += d
		}
	}
	if total > 5 {
		t.Fatalf("%d commands in 3 s while 1,000 streams were idle, want the process's background only (≤ 5)", total)
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.api.Close() }()
	for _, c := range conns {
		c.ended(t, 10*time.Second)
	}
	if err := <-done; err != nil {
		t.Fatalf("api close: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown with 1,000 streams took %v", d)
	}
}

// subscribers counts CLIENT LIST's connections in pub/sub.
func subscribers(list string) int {
	n := 0
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if (strings.HasPrefix(f, "sub=") || strings.HasPrefix(f, "psub=") || strings.HasPrefix(f, "ssub=")) && f[strings.IndexByte(f, '=')+1:] != "0" {
				n++
				break
			}
		}
	}
	return n
}

// commandCalls is INFO commandstats: calls by command.
func commandCalls(t *testing.T, rdb redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls int64
		fmt.Sscanf(rest, "calls=%d", &calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = calls
	}
	return out
}

// On a 3-master Redis Cluster the api's hub holds its shards with
// SSUBSCRIBE on their slots' masters, and the worker's SPUBLISH reaches the
// stream.
func TestOrderStream_cluster_shardedPubSub(t *testing.T) {
	s := newClusterStack(t)
	act := s.sale(10, 1, 600)
	o := orderOfReply(t, s.order(7, act, 1), 7)
	c := s.openStream(streamClient(), 7, o.No, "")
	expect(t, c.next(t, 5*time.Second), "order.accepted", "1.0", o.No)
	if err := s.eventSource().commit(orderEvents(o, order.Cancelled, time.Now())...); err != nil {
		t.Fatal(err)
	}
	expect(t, c.next(t, 5*time.Second), "order.cancelled", "2.0", o.No)
	c.ended(t, 5*time.Second)
}

// The real producers feed the streams: the worker's write of an order's
// change publishes what it committed (mysqlstore.Orders.OnCommit, wired in
// openStack); the test publishes nothing itself. A paid order's stream and
// a cancelled one's each end after their final event, and the accepted
// event the worker commits again after the stream sent it from the record
// is not sent twice.
func TestOrderStream_fedByTheWorkersCommits(t *testing.T) {
	s := newStack(t, "")
	s.worker()
	act := s.sale(10, 1, 600)

	paid := orderOfReply(t, s.order(1, act, 1), 1)
	c := s.openStream(streamClient(), 1, paid.No, "")
	expect(t, c.next(t, 5*time.Second), "order.accepted", "1.0", paid.No)
	s.waitMySQL(1, 10*time.Second, "SELECT COUNT(*) FROM orders WHERE order_no = ?", paid.No)
	if p := s.pay(1, paid.No); p.code != 200 {
		t.Fatalf("pay: %d %v", p.code, p.body)
	}
	expect(t, c.next(t, 15*time.Second), "order.paid", "2.0", paid.No)
	c.ended(t, 5*time.Second)

	gone := orderOfReply(t, s.order(2, act, 1), 2)
	c2 := s.openStream(streamClient(), 2, gone.No, "")
	expect(t, c2.next(t, 5*time.Second), "order.accepted", "1.0", gone.No)
	if r := s.call("POST", "/v1/orders/"+gone.No+"/cancel", s.bearer(2), ""); r.code != 200 {
		t.Fatalf("cancel: %d %v", r.code, r.body)
	}
	ev := c2.next(t, 15*time.Second)
	expect(t, ev, "order.cancelled", "2.0", gone.No)
	if !strings.Contains(ev.data, `"reason":"shopper"`) {
		t.Fatalf("cancelled's data %s: want the shopper's reason", ev.data)
	}
	c2.ended(t, 5*time.Second)
}
