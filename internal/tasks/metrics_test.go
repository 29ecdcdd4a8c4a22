package tasks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
)

// The queue's figures come from asynq's own records in Redis: a payment
// timeout scheduled, a sync due and waiting.
func TestQueueCollector_tasksByStateAndLatency(t *testing.T) {
	sh := ordertest.New(t)
	c := asynq.NewClientFromRedisClient(sh.RDB)
	q := NewQueue(c)
	ctx := context.Background()
	if err := q.ExpireAt(ctx, order.NewNo(1), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := q.Sync(ctx, order.NewNo(1), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the sync has waited a second: asynq's latency counts whole seconds
	col := QueueCollector(asynq.NewInspectorFromRedisClient(sh.RDB))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = m.GetGauge().GetValue()
		}
	}
	if got["flashsale_queue_tasks/scheduled"] != 1 || got["flashsale_queue_tasks/pending"] != 1 || got["flashsale_queue_tasks/archived"] != 0 {
		t.Errorf("tasks by state %v; want 1 scheduled, 1 pending", got)
	}
	if l := got["flashsale_queue_latency_seconds"]; l < 1 || l > 10 {
		t.Errorf("latency %v s, want the pending sync's second or so", l)
	}
}

// A sync observes how long after its latest change each order reached
// MySQL.
func TestWorker_withMetrics_observesPersistenceLag(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 21, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	var p batchPayload
	for user := int64(1); user <= 3; user++ {
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 21, UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		p.Orders = append(p.Orders, syncPayload{No: o.No})
	}
	time.Sleep(100 * time.Millisecond)
	reg := prometheus.NewRegistry()
	w := NewWorker(DurableService{}, sh.Store, &recorded{}, &recorded{}, ordertest.Log()).WithMetrics(reg)
	raw, _ := json.Marshal(p)
	if err := w.HandleSyncBatch(ctx, asynq.NewTask(TypeSyncBatch, raw)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(w.lag); n != 1 {
		t.Fatalf("%d lag series", n)
	}
	mfs, _ := reg.Gather()
	h := mfs[0].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() < 0.3 || h.GetSampleSum() > 30 {
		t.Errorf("lag: %d samples summing %vs; want 3 of 0.1 s or more each", h.GetSampleCount(), h.GetSampleSum())
	}
}
