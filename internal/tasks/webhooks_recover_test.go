package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// A recovery queues the endpoint's events since a time in pages, each a
// task named by its endpoint and first event: a second recovery of the
// same time while the first's tasks wait queues nothing twice (real asynq
// on a real Redis, the outbox in MariaDB).
func TestWebhookQueue_recoverTwice_doesNotDoubleWhatIsPending(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	ctx := context.Background()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	hooks := mysqlstore.NewWebhooks(db)
	t.Cleanup(hooks.Close)
	q := tasks.NewWebhookQueue(asynq.NewClientFromRedisClient(rdb), rdb)
	svc := webhook.NewService(hooks, hooks, hooks, q, webhook.ServiceConfig{Guard: webhook.Guard{AllowPrivate: true}})
	ep, err := svc.Create(ctx, webhook.New{URL: "http://127.0.0.1:9/", Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for i := range 150 { // three pages of 64
		o := order.Order{No: fmt.Sprintf("42-V%03d", i), ActivityID: 42, UserID: 1, Quantity: 1, Status: order.PendingPayment, CreatedAt: at}
		if err := hooks.Append(ctx, webhook.OrderEvents(webhook.OrderChange{Order: o})...); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	queued := func() (batches, deliveries int) {
		t.Helper()
		ts, err := insp.ListPendingTasks(tasks.WebhookQueueName, asynq.PageSize(1000))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range ts {
			var n int
			for i := 0; i+4 < len(task.Payload); i++ { // count the items' event ids in the batch's JSON
				if string(task.Payload[i:i+5]) == `"ev":` {
					n++
				}
			}
			deliveries += n
		}
		return len(ts), deliveries
	}
	since := at.Add(-time.Minute)
	r, err := svc.Recover(ctx, ep.ID, since)
	if err != nil || r.Events != 150 {
		t.Fatalf("recover: %+v %v", r, err)
	}
	if n, d := queued(); n != 3 || d != 150 {
		t.Fatalf("after one recovery: %d tasks of %d deliveries, want 3 of 150", n, d)
	}
	if _, err := svc.Recover(ctx, ep.ID, since); err != nil {
		t.Fatal(err)
	}
	if n, d := queued(); n != 3 || d != 150 {
		t.Fatalf("after the same recovery again: %d tasks of %d deliveries, want still 3 of 150", n, d)
	}
}

// The dispatcher's leader prunes what the retention lets go, between its
// passes: an old dispatched event goes, a new one stays.
func TestWebhookDispatcher_leaderPrunesOldEvents(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	hooks := mysqlstore.NewWebhooks(db)
	t.Cleanup(hooks.Close)
	mk := func(no string) webhook.Event {
		return webhook.OrderEvents(webhook.OrderChange{Order: order.Order{No: no, ActivityID: 42, UserID: 1, Quantity: 1,
			Status: order.PendingPayment, CreatedAt: time.Now()}})[0]
	}
	old, recent := mk("42-OLD"), mk("42-NEW")
	if err := hooks.Append(ctx, old, recent); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("UPDATE webhook_events SET created_at = ? WHERE id = ?", time.Now().Add(-40*24*time.Hour).UTC(), old.ID).Error; err != nil {
		t.Fatal(err)
	}
	locks := lock.NewClient(rdb, lock.Config{})
	t.Cleanup(func() { _ = locks.Close() })
	d := webhook.NewDispatcher(hooks, hooks, tasks.NewWebhookQueue(asynq.NewClientFromRedisClient(rdb), rdb))
	run := tasks.NewWebhookDispatcher(locks, d, webhook.NewRetention(hooks, 0), 20*time.Millisecond, slog.New(slog.DiscardHandler))
	run.PruneEvery = 50 * time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); run.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, errOld := hooks.Event(ctx, old.ID)
		if errors.Is(errOld, webhook.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old event was not pruned: %v", errOld)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := hooks.Event(ctx, recent.ID); err != nil {
		t.Fatalf("the recent event: %v", err)
	}
	cancel()
	<-done
}
