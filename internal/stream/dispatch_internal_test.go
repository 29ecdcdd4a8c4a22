package stream

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// message is a publisher's message of n order events (order.accepted, each
// with a webhook body of about 400 bytes), as a batch of the worker's makes.
func message(tb testing.TB, n int) string {
	tb.Helper()
	items := make([]Item, n)
	for i := range items {
		no := fmt.Sprintf("FS%020d", i)
		body := fmt.Sprintf(`{"type":"order.accepted","timestamp":"2026-11-29T08:00:00.000Z","data":{"order_no":%q,"activity_id":1,"user_id":%d,"item":"LOAD-1","quantity":1,"amount_cents":990,"currency":"cny","status":"pending_payment","pay_by":"2026-11-29T08:15:00.000Z","sequence":1,%s}}`,
			no, i, strings.Repeat(`"x":"y",`, 20)+`"z":0`)
		items[i] = Item{Topics: []string{OrderTopic(no)}, Subject: no, Seq: 1, ID: fmt.Sprintf("evt_%026d", i), Name: "order.accepted", Data: json.RawMessage(body)}
	}
	raw, err := json.Marshal(items)
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

func quietHub() *Hub {
	return &Hub{topics: map[string]map[*Subscription]struct{}{}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{Buffer: 16}}
}

// A message is delivered to the subscribers of its topics, whatever else
// it carries; a process with no subscriber looks at it no further.
func TestDispatch_deliversToSubscribedTopics_skipsTheRest(t *testing.T) {
	h := quietHub()
	msg := message(t, 64)
	h.dispatch(msg) // nobody subscribed: nothing to deliver, no panic
	s := &Subscription{hub: h, topic: OrderTopic(fmt.Sprintf("FS%020d", 17)), items: make(chan Item, 16), done: make(chan struct{})}
	other := &Subscription{hub: h, topic: OrderTopic("ELSEWHERE"), items: make(chan Item, 16), done: make(chan struct{})}
	h.topics[s.topic] = map[*Subscription]struct{}{s: {}}
	h.topics[other.topic] = map[*Subscription]struct{}{other: {}}
	h.dispatch(msg)
	select {
	case it := <-s.items:
		if it.Subject != fmt.Sprintf("FS%020d", 17) || it.Name != "order.accepted" || !strings.Contains(string(it.Data), `"user_id":17`) {
			t.Fatalf("delivered %+v", it)
		}
	default:
		t.Fatal("the subscriber of order 17 got nothing")
	}
	if len(s.items) != 0 || len(other.items) != 0 {
		t.Fatalf("more delivered than the one item: %d and %d", len(s.items), len(other.items))
	}
}

// BenchmarkDispatch: what an api spends on a message of 64 order events
// (a worker's batch, one shard's share) when no stream is open here (it is
// skipped), when streams are open but none of these orders', and when one
// of them is (decoded whole, as every message was before).
//
//	go test -run '^$' -bench Dispatch -benchmem ./internal/stream/
func BenchmarkDispatch(b *testing.B) {
	msg := message(b, 64)
	for _, tc := range []struct {
		name  string
		topic string
	}{{"no streams here", ""}, {"streams, none of these orders", OrderTopic("ELSEWHERE")}, {"one of these orders' stream", OrderTopic(fmt.Sprintf("FS%020d", 3))}} {
		b.Run(tc.name, func(b *testing.B) {
			h := quietHub()
			var s *Subscription
			if tc.topic != "" {
				s = &Subscription{hub: h, topic: tc.topic, items: make(chan Item, 1<<20), done: make(chan struct{})}
				h.topics[tc.topic] = map[*Subscription]struct{}{s: {}}
			}
			b.ReportAllocs()
			for b.Loop() {
				h.dispatch(msg)
				if s != nil && len(s.items) > 1<<19 {
					for len(s.items) > 0 {
						<-s.items
					}
				}
			}
		})
	}
}
