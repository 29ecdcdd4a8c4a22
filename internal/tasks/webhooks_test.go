package tasks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
)

// endpoints is one endpoint, and a log, in memory.
type endpoints struct {
	mu  sync.Mutex
	ep  webhook.Endpoint
	log []webhook.Attempt
}

func (e *endpoints) CreateEndpoint(context.Context, *webhook.Endpoint) error { panic("unused") }
func (e *endpoints) Endpoints(context.Context) ([]webhook.Endpoint, error)   { panic("unused") }
func (e *endpoints) UpdateEndpoint(context.Context, int64, func(*webhook.Endpoint) error) (webhook.Endpoint, error) {
	panic("unused")
}
func (e *endpoints) DeleteEndpoint(context.Context, int64) error               { panic("unused") }
func (e *endpoints) DisableFailing(context.Context, int64) (bool, error)       { return false, nil }
func (e *endpoints) Endpoint(context.Context, int64) (webhook.Endpoint, error) { return e.ep, nil }
func (e *endpoints) Record(a webhook.Attempt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, a)
}
func (e *endpoints) Attempts(context.Context, int64, string, int, int) ([]webhook.Attempt, int64, error) {
	panic("unused")
}
func (e *endpoints) DeliveredSince(context.Context, int64, time.Time) (bool, error) {
	return false, nil
}

// A batch whose second delivery fails queues one retry task — the failed
// delivery as its next attempt and the one after it, untried, as its first
// — due after the schedule's wait; run again (its worker killed after
// queueing), it queues no second one.
func TestWebhookWorker_failedBatch_queuesOneRetryOfTheRest(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderID) == "evt_B" {
			w.WriteHeader(503)
		}
	}))
	t.Cleanup(srv.Close)
	eps := &endpoints{ep: webhook.Endpoint{ID: 1, URL: srv.URL, Secret: webhook.NewSecret(), Enabled: true}}
	d := webhook.NewDeliverer(eps, eps, webhook.NewSender(webhook.SenderConfig{Guard: webhook.Guard{AllowPrivate: true}}),
		webhook.DelivererConfig{Schedule: webhook.Schedule{time.Minute}})
	client := asynq.NewClientFromRedisClient(rdb)
	q := tasks.NewWebhookQueue(client, rdb)
	var ds []webhook.Delivery
	for _, id := range []string{"evt_A", "evt_B", "evt_C"} {
		ds = append(ds, webhook.Delivery{EndpointID: 1, EventID: id, Type: webhook.OrderPaid, Body: []byte(`{}`), Since: time.Now()})
	}
	ctx := context.Background()
	if err := q.Deliver(ctx, ds); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	pending, err := insp.ListPendingTasks(tasks.WebhookQueueName)
	if err != nil || len(pending) != 1 || !strings.HasPrefix(pending[0].ID, "whd:1:evt_A:") {
		t.Fatalf("pending %+v, %v: want one batch", pending, err)
	}
	// Run the batch's handler as asynq would, twice.
	w := tasks.NewWebhookWorker(d, q)
	task := asynq.NewTask(tasks.TypeWebhookDeliver, pending[0].Payload)
	for range 2 {
		if err := w.Handle(ctx, task); err != nil { // (no task id in ctx: retryID hashes "")
			t.Fatal(err)
		}
	}
	scheduled, err := insp.ListScheduledTasks(tasks.WebhookQueueName)
	if err != nil || len(scheduled) != 1 {
		t.Fatalf("scheduled %+v, %v: want one retry", scheduled, err)
	}
	var retry struct {
		Items []struct {
			Event   string `json:"ev"`
			Attempt int    `json:"n"`
		} `json:"i"`
	}
	if err := json.Unmarshal(scheduled[0].Payload, &retry); err != nil {
		t.Fatal(err)
	}
	if len(retry.Items) != 2 || retry.Items[0].Event != "evt_B" || retry.Items[0].Attempt != 2 ||
		retry.Items[1].Event != "evt_C" || retry.Items[1].Attempt != 1 {
		t.Fatalf("the retry carries %+v", retry.Items)
	}
	if due := time.Until(scheduled[0].NextProcessAt); due < 50*time.Second || due > 70*time.Second ||
		!strings.HasPrefix(scheduled[0].ID, "whx:") {
		t.Fatalf("the retry %s is due in %v, want about a minute", scheduled[0].ID, due)
	}
}

// A dispatcher that reads the outbox again queues nothing twice for the
// same batch; a batch of another shape — an event committed late sorted
// among those read before (the worker's transactions commit out of their
// rows' order) — is queued, however its first event was queued before:
// refusing it for its first event lost the late event (marked dispatched,
// never queued).
func TestWebhookQueue_dispatchedAgain_sameBatchRefused_otherShapeQueued(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	q := tasks.NewWebhookQueue(asynq.NewClientFromRedisClient(rdb), rdb)
	batch := func(ids ...string) []webhook.Delivery {
		var ds []webhook.Delivery
		for _, id := range ids {
			ds = append(ds, webhook.Delivery{EndpointID: 1, EventID: id, Type: webhook.OrderPaid, Body: []byte(`{}`), Since: time.Now()})
		}
		return ds
	}
	ctx := context.Background()
	for _, b := range [][]webhook.Delivery{batch("evt_A", "evt_B", "evt_C"), batch("evt_A", "evt_B", "evt_C"), batch("evt_A", "evt_LATE", "evt_B", "evt_C")} {
		if err := q.Deliver(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := asynq.NewInspectorFromRedisClient(rdb).ListPendingTasks(tasks.WebhookQueueName)
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for _, p := range pending {
		if strings.Contains(string(p.Payload), "evt_LATE") {
			late++
		}
	}
	if len(pending) != 2 || late != 1 {
		t.Fatalf("%d batches queued, %d with evt_LATE: want 2 (the same batch once) and 1", len(pending), late)
	}
}

// With no endpoint enabled the dispatcher moves its cursor past the events
// unread and queues nothing (no one is owed them); once an endpoint is
// enabled, the events appended after are queued to it, and those skipped
// are not.
func TestWebhookDispatcher_noEndpoint_skipsUnread_thenDispatchesWhatFollows(t *testing.T) {
	e := newRepairEnv(t)
	ctx := context.Background()
	d := webhook.NewDispatcher(e.hooks, e.hooks, e.q)
	d.Batch = 4
	skipped := e.events(t, 0, 6)
	if n, err := d.Pass(ctx); err != nil || n != 4 {
		t.Fatalf("first pass: %d %v; want 4 skipped (a batch)", n, err)
	}
	if n, err := d.Pass(ctx); err != nil || n != 2 {
		t.Fatalf("second pass: %d %v; want the other 2", n, err)
	}
	if n, err := e.hooks.CountUndispatched(ctx); err != nil || n != 0 {
		t.Fatalf("undispatched after skipping: %d %v", n, err)
	}
	if q, _ := e.queued(t); len(q) != 0 {
		t.Fatalf("queued with no endpoint: %v", q)
	}
	if _, err := e.svc.Create(ctx, webhook.New{URL: "http://127.0.0.1:9/", Events: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	after := e.events(t, 10, 3)
	if n, err := d.Pass(ctx); err != nil || n != 3 {
		t.Fatalf("pass with an endpoint: %d %v; want 3", n, err)
	}
	q, _ := e.queued(t)
	for _, ev := range after {
		if q[ev.ID] != 1 {
			t.Errorf("event %s: queued %v, want its first attempt", ev.ID, q[ev.ID])
		}
	}
	for _, ev := range skipped {
		if _, ok := q[ev.ID]; ok {
			t.Errorf("skipped event %s queued", ev.ID)
		}
	}
}
