package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// repairEnv is a real Redis and MariaDB under the webhooks: the outbox,
// the delivery log, the queue.
type repairEnv struct {
	redis *testenv.RedisServer
	rdb   *redis.Client
	db    *gorm.DB
	hooks *mysqlstore.Webhooks
	q     *tasks.WebhookQueue
	svc   *webhook.Service
}

func newRepairEnv(t *testing.T) *repairEnv {
	t.Helper()
	e := &repairEnv{redis: testenv.StartRedis(t)}
	e.rdb = e.redis.Client(t)
	var err error
	if e.db, err = connect.MySQL(testenv.MySQL(t)); err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := e.db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	e.hooks = mysqlstore.NewWebhooks(e.db)
	t.Cleanup(e.hooks.Close)
	e.q = tasks.NewWebhookQueue(asynq.NewClientFromRedisClient(e.rdb), e.rdb)
	e.svc = webhook.NewService(e.hooks, e.hooks, e.hooks, e.q, webhook.ServiceConfig{Guard: webhook.Guard{AllowPrivate: true}})
	return e
}

// events appends n order.accepted events, numbered from first.
func (e *repairEnv) events(t *testing.T, first, n int) []webhook.Event {
	t.Helper()
	var out []webhook.Event
	for i := first; i < first+n; i++ {
		o := order.Order{No: fmt.Sprintf("42-R%03d", i), ActivityID: 42, UserID: int64(i), Quantity: 1,
			Status: order.PendingPayment, CreatedAt: time.Now()}
		out = append(out, webhook.OrderEvents(webhook.OrderChange{Order: o})...)
	}
	if err := e.hooks.Append(context.Background(), out...); err != nil {
		t.Fatal(err)
	}
	return out
}

// queued lists the deliveries the webhooks' queue holds, by event, with
// the attempt each is to make, and the TaskIDs.
func (e *repairEnv) queued(t *testing.T) (map[string]int, []string) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	ts, err := insp.ListPendingTasks(tasks.WebhookQueueName, asynq.PageSize(1000))
	if errors.Is(err, asynq.ErrQueueNotFound) {
		return map[string]int{}, nil // nothing queued yet
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var ids []string
	for _, task := range ts {
		var b struct {
			Items []struct {
				Event   string `json:"ev"`
				Attempt int    `json:"n"`
			} `json:"i"`
		}
		if err := json.Unmarshal(task.Payload, &b); err != nil {
			t.Fatal(err)
		}
		for _, it := range b.Items {
			out[it.Event] = it.Attempt
		}
		ids = append(ids, task.ID)
	}
	return out, ids
}

// A loss of Redis takes the tasks queued in a window before it. The
// repair queues again each delivery dispatched in the window that no task
// holds and no attempt ended — the first delivery with its first attempt,
// a lost retry as the attempt it was to be — and leaves alone what a task
// holds (queued after the loss), what was delivered, what ran out of
// attempts, and what was dispatched before the window. Real Redis (killed
// and restarted empty: a new server, its run id another), real asynq, the
// outbox and the delivery log in MariaDB.
func TestWebhookRepair_redisLostItsTasks_queuedAgain_heldAndEndedLeftAlone(t *testing.T) {
	e := newRepairEnv(t)
	ctx := context.Background()
	ep, err := e.svc.Create(ctx, webhook.New{URL: "http://127.0.0.1:9/", Events: []string{"order.accepted"}})
	if err != nil {
		t.Fatal(err)
	}
	d := webhook.NewDispatcher(e.hooks, e.hooks, e.q)
	pass := func() {
		t.Helper()
		if _, err := d.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := e.events(t, 0, 2) // dispatched before the window: not the repair's
	pass()
	// That pass an hour ago.
	if err := e.db.Exec("UPDATE webhook_dispatches SET dispatched_at = ?", time.Now().Add(-time.Hour).UTC()).Error; err != nil {
		t.Fatal(err)
	}
	since := time.Now().Truncate(time.Millisecond) // dispatched_at's resolution
	lost := e.events(t, 10, 10)
	pass()
	identity := tasks.RedisIdentity(e.rdb, tasks.WebhookQueueName)
	was, err := identity(ctx)
	if err != nil || was == "" {
		t.Fatalf("identity: %q %v", was, err)
	}
	// Of the ten: the first delivered, the second's first attempt failed
	// (its retry's task queued then), the third ran out of attempts.
	at := time.Now()
	e.hooks.Record(webhook.Attempt{EndpointID: ep.ID, EventID: lost[0].ID, Type: lost[0].Type, Number: 1, Status: 200, At: at, Delivered: true, Last: true})
	e.hooks.Record(webhook.Attempt{EndpointID: ep.ID, EventID: lost[1].ID, Type: lost[1].Type, Number: 1, Status: 500, At: at, Error: "500"})
	e.hooks.Record(webhook.Attempt{EndpointID: ep.ID, EventID: lost[2].ID, Type: lost[2].Type, Number: 8, Status: 500, At: at, Error: "500", Last: true})

	e.redis.Kill()
	e.redis.Restart()
	if now, err := identity(ctx); err != nil || now == was {
		t.Fatalf("after a restart the identity is %q (%v), was %q: want another", now, err, was)
	}
	after := e.events(t, 30, 3) // dispatched into the Redis there is now: held
	pass()

	r := webhook.NewRepairer(e.hooks, e.hooks, e.hooks, e.q, e.q)
	r.Settle = 500 * time.Millisecond // the log's rows above are written by then
	got, err := r.Repair(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checked != 13 || got.Held != 3 || got.Queued != 8 {
		t.Errorf("repair: %+v; want 13 checked (10 lost, 3 after), 3 held, 8 queued again", got)
	}
	q, _ := e.queued(t)
	for i, ev := range lost {
		want := map[int]int{0: 0, 1: 2, 2: 0}[i]
		if i > 2 {
			want = 1
		}
		if q[ev.ID] != want {
			t.Errorf("lost event %d: queued for attempt %d, want %d (0: not queued)", i, q[ev.ID], want)
		}
	}
	for _, ev := range append(before, after...) {
		if _, ok := q[ev.ID]; ok != (ev.ID == after[0].ID || ev.ID == after[1].ID || ev.ID == after[2].ID) {
			t.Errorf("event %s queued %v", ev.ID, ok)
		}
	}
	// A second repair finds the first's tasks: it queues nothing twice.
	again, err := r.Repair(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	if again.Queued != 0 || again.Held != 11 {
		t.Errorf("second repair: %+v; want 11 held (8 repaired, 3 after), none queued", again)
	}
}

// The leader watches the Redis it queues into: when its run id changes
// (here the Redis under the lock is kept, and only the queue's tasks are
// lost, as a replica behind its primary loses them at a failover), it
// repairs, and every event reaches the receiver, once the deliveries run.
// Without the repair the lost tasks are gone for good and the receiver
// never sees them.
func TestWebhookDispatcher_redisIdentityChanged_lostDeliveriesRepaired_everyEventReceived(t *testing.T) {
	e := newRepairEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	received := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	if _, err := e.svc.Create(ctx, webhook.New{URL: srv.URL, Events: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	locks := lock.NewClient(e.rdb, lock.Config{})
	t.Cleanup(func() { _ = locks.Close() })
	log := slog.New(slog.DiscardHandler)
	run := tasks.NewWebhookDispatcher(locks, webhook.NewDispatcher(e.hooks, e.hooks, e.q), nil, 20*time.Millisecond, log)
	run.IdentityEvery = 50 * time.Millisecond
	var identity atomic.Value
	identity.Store("redis-1")
	rep := webhook.NewRepairer(e.hooks, e.hooks, e.hooks, e.q, e.q)
	rep.Settle = 100 * time.Millisecond
	run.Repairs(rep, func(context.Context) (string, error) { return identity.Load().(string), nil }, time.Minute)
	done := make(chan struct{})
	go func() { defer close(done); run.Run(ctx) }()
	defer func() { cancel(); <-done }()

	events := e.events(t, 100, 40)
	waitFor(t, 10*time.Second, "every event dispatched", func() bool {
		n, err := e.hooks.CountUndispatched(ctx)
		return err == nil && n == 0
	})
	// The loss: the queue's tasks gone, the Redis now another.
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	if n, err := insp.DeleteAllPendingTasks(tasks.WebhookQueueName); err != nil || n == 0 {
		t.Fatalf("deleted %d pending tasks: %v", n, err)
	}
	identity.Store("redis-2")
	waitFor(t, 10*time.Second, "the lost deliveries queued again", func() bool {
		q, _ := e.queued(t)
		return len(q) == len(events)
	})
	// The deliveries run: every event arrives.
	deliverer := webhook.NewDeliverer(e.hooks, e.hooks, webhook.NewSender(webhook.SenderConfig{Guard: webhook.Guard{AllowPrivate: true}}),
		webhook.DelivererConfig{Schedule: webhook.Schedule{0, 100 * time.Millisecond}, Log: log})
	server := asynq.NewServerFromRedisClient(e.rdb, asynq.Config{Concurrency: 4, Queues: map[string]int{tasks.WebhookQueueName: 1},
		IsFailure: tasks.WebhookIsFailure, RetryDelayFunc: tasks.WebhookRetryDelay, TaskCheckInterval: 50 * time.Millisecond,
		Logger: quietAsynq{}})
	mux := asynq.NewServeMux()
	tasks.NewWebhookWorker(deliverer, e.q).Register(mux)
	if err := server.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Shutdown)
	waitFor(t, 20*time.Second, "every event received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if received[ev.ID] == 0 {
				return false
			}
		}
		return true
	})
}

// waitFor polls ok until it holds, or fails the test after within.
func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(...any) {}
