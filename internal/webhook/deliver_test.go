package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/webhook"
)

// store is the record of endpoints and the delivery log, in memory.
type store struct {
	mu       sync.Mutex
	eps      map[int64]webhook.Endpoint
	attempts []webhook.Attempt
	reads    int
}

func (s *store) CreateEndpoint(_ context.Context, e *webhook.Endpoint) error { panic("unused") }
func (s *store) Endpoints(context.Context) ([]webhook.Endpoint, error)       { panic("unused") }
func (s *store) UpdateEndpoint(context.Context, int64, func(*webhook.Endpoint) error) (webhook.Endpoint, error) {
	panic("unused")
}
func (s *store) DeleteEndpoint(context.Context, int64) error { panic("unused") }

func (s *store) Endpoint(_ context.Context, id int64) (webhook.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	e, ok := s.eps[id]
	if !ok {
		return webhook.Endpoint{}, webhook.ErrNotFound
	}
	return e, nil
}

func (s *store) DisableFailing(_ context.Context, id int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.eps[id]
	if !e.Enabled {
		return false, nil
	}
	e.Enabled, e.DisabledReason = false, webhook.DisabledFailing
	s.eps[id] = e
	return true, nil
}

func (s *store) Record(a webhook.Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = append(s.attempts, a)
}

func (s *store) Attempts(context.Context, int64, string, int, int) ([]webhook.Attempt, int64, error) {
	panic("unused")
}

func (s *store) DeliveredSince(_ context.Context, id int64, since time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.attempts {
		if a.EndpointID == id && a.Delivered && !a.At.Before(since) {
			return true, nil
		}
	}
	return false, nil
}

func newDeliverer(t *testing.T, handler http.HandlerFunc, cfg webhook.DelivererConfig) (*webhook.Deliverer, *store) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	st := &store{eps: map[int64]webhook.Endpoint{1: {ID: 1, URL: srv.URL, Secret: webhook.NewSecret(), Enabled: true, Events: []string{"*"}}}}
	sender := webhook.NewSender(webhook.SenderConfig{Guard: webhook.Guard{AllowPrivate: true}, Timeout: 2 * time.Second})
	return webhook.NewDeliverer(st, st, sender, cfg), st
}

var aDelivery = webhook.Delivery{EndpointID: 1, EventID: "evt_A", Type: webhook.OrderPaid, Body: []byte(`{"type":"order.paid"}`)}

// one makes a batch of one delivery, attempt n.
func one(dv webhook.Delivery, n int) []webhook.Delivery {
	dv.Attempt = n
	return []webhook.Delivery{dv}
}

// A failed attempt is to be tried again after the schedule's wait
// (jittered ±10%); the last one's failure ends the delivery, and, the
// endpoint having answered nothing but failures since the delivery began,
// disables it.
func TestDeliverBatch_failuresFollowTheSchedule_thenTheEndpointIsDisabled(t *testing.T) {
	sched := webhook.Schedule{time.Second, time.Minute}
	d, st := newDeliverer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) },
		webhook.DelivererConfig{Schedule: sched, EndpointCache: time.Nanosecond})
	ctx := context.Background()
	dv := aDelivery
	dv.Since = time.Now()
	for n, want := range []time.Duration{1: time.Second, 2: time.Minute} {
		if n == 0 {
			continue
		}
		rs, err := d.DeliverBatch(ctx, one(dv, n))
		if err != nil || len(rs) != 1 || rs[0].Attempt != n+1 || rs[0].After < want*9/10 || rs[0].After > want*11/10 {
			t.Fatalf("attempt %d: %+v, %v; want attempt %d after about %v", n, rs, err, n+1, want)
		}
	}
	if rs, err := d.DeliverBatch(ctx, one(dv, 3)); err != nil || len(rs) != 0 {
		t.Fatalf("the last attempt: %+v, %v; want the delivery over", rs, err)
	}
	if e := st.eps[1]; e.Enabled || e.DisabledReason != webhook.DisabledFailing {
		t.Fatalf("after a whole schedule of failures the endpoint is %+v", e)
	}
	if n := len(st.attempts); n != 3 || !st.attempts[2].Last || st.attempts[2].Status != 500 || st.attempts[0].Last {
		t.Fatalf("log %+v", st.attempts)
	}
	// Disabled, its deliveries are not sent, and say so.
	if rs, err := d.DeliverBatch(ctx, one(dv, 1)); err != nil || len(rs) != 0 || len(st.attempts) != 4 ||
		st.attempts[3].Status != 0 || !st.attempts[3].Last {
		t.Fatalf("to a disabled endpoint: %+v, %v, log %+v", rs, err, st.attempts[3:])
	}
}

// A batch stops at its first failure: the endpoint is likely down, and
// the rest, not tried, follow the failed one's retry as the same attempt.
func TestDeliverBatch_firstFailure_theRestFollowItsRetryUntried(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	d, st := newDeliverer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Get(webhook.HeaderID))
		if r.Header.Get(webhook.HeaderID) == "evt_B" {
			w.WriteHeader(503)
		}
	}, webhook.DelivererConfig{Schedule: webhook.Schedule{time.Second, time.Second}})
	var batch []webhook.Delivery
	for i, id := range []string{"evt_A", "evt_B", "evt_C", "evt_D"} {
		dv := aDelivery
		dv.EventID, dv.Attempt = id, 1+i%2
		batch = append(batch, dv)
	}
	rs, err := d.DeliverBatch(context.Background(), batch)
	if err != nil || len(seen) != 2 || seen[1] != "evt_B" {
		t.Fatalf("sent %v, %v: want A, then B, which failed", seen, err)
	}
	if len(rs) != 3 || rs[0].EventID != "evt_B" || rs[0].Attempt != 3 || rs[1].EventID != "evt_C" || rs[1].Attempt != 1 ||
		rs[2].EventID != "evt_D" || rs[2].Attempt != 2 || rs[1].After != rs[0].After {
		t.Fatalf("retries %+v", rs)
	}
	if len(st.attempts) != 2 {
		t.Fatalf("logged %+v: the untried ones are not attempts", st.attempts)
	}
}

// An endpoint that refuses one event but takes others works: that event's
// last failure does not disable it.
func TestDeliverBatch_lastFailureOfOneEvent_whileOthersAreDelivered_keepsTheEndpoint(t *testing.T) {
	d, st := newDeliverer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderID) == "evt_A" {
			w.WriteHeader(400)
		}
	}, webhook.DelivererConfig{Schedule: webhook.Schedule{}})
	ctx := context.Background()
	since := time.Now()
	other := aDelivery
	other.EventID = "evt_B"
	if _, err := d.DeliverBatch(ctx, one(other, 1)); err != nil {
		t.Fatal(err)
	}
	dv := aDelivery
	dv.Since = since
	if _, err := d.DeliverBatch(ctx, one(dv, 1)); err != nil {
		t.Fatal(err)
	}
	if !st.eps[1].Enabled {
		t.Fatal("disabled though it took another event meanwhile")
	}
}

// At its concurrency limit an endpoint turns batches away without sending
// them (not an attempt), and says when to come back.
func TestDeliverBatch_endpointAtItsLimit_turnsBatchesAwayUnsent(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	sent := 0
	d, st := newDeliverer(t, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		sent++
		mu.Unlock()
		<-release
	}, webhook.DelivererConfig{EndpointConcurrency: 2})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = d.DeliverBatch(ctx, one(aDelivery, 1)) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := sent
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var busy *webhook.Busy
	_, err := d.DeliverBatch(ctx, one(aDelivery, 1))
	close(release)
	wg.Wait()
	if !errors.As(err, &busy) || busy.After <= 0 {
		t.Fatalf("a third at once: %v, want busy", err)
	}
	if sent != 2 || len(st.attempts) != 2 {
		t.Fatalf("sent %d, logged %d: the busy one was sent or logged", sent, len(st.attempts))
	}
}

// A deleted endpoint's deliveries end quietly.
func TestDeliverBatch_deletedEndpoint_endsTheDeliveries(t *testing.T) {
	d, st := newDeliverer(t, func(http.ResponseWriter, *http.Request) {}, webhook.DelivererConfig{})
	delete(st.eps, 1)
	if rs, err := d.DeliverBatch(context.Background(), one(aDelivery, 1)); err != nil || len(rs) != 0 || len(st.attempts) != 0 {
		t.Fatalf("%+v, %v, log %+v", rs, err, st.attempts)
	}
}
