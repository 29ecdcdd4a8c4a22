package order_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// hungUp is the store, but the client hangs up while the accept is in
// flight: Redis is paused as the accept begins, the request's context is
// cancelled once the accept's pipeline is out, and Redis resumes.
type hungUp struct {
	order.Store
	srv    *testenv.RedisServer
	cancel context.CancelFunc
}

func (h *hungUp) Accept(ctx context.Context, no string, r order.PlaceRequest, t order.UserTurn) (order.Accepted, error) {
	h.srv.Pause()
	go func() {
		// The accept's pipeline goes out within microseconds; a second is
		// for a loaded -race run.
		time.Sleep(time.Second)
		h.cancel()
		time.Sleep(100 * time.Millisecond)
		h.srv.Resume()
	}()
	return h.Store.Accept(ctx, no, r, t)
}

// acceptedTasks records the orders handed to the task relay.
type acceptedTasks struct {
	ordertest.NoTasks
	mu  sync.Mutex
	nos []string
}

func (a *acceptedTasks) ExpireThenSync(_ context.Context, no string, _ time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nos = append(a.nos, no)
	return nil
}

// An order whose client hangs up while its accept is in flight is still
// answered and handed to the task relay: it is in Redis, and with its tasks
// it reaches MySQL at once rather than when the reconciler finds it in the
// outbox, 5-7 s later (before the pipe waited for calls in flight, the
// request failed with context.Canceled and nothing was queued).
func TestService_place_clientHangsUpDuringTheAccept_orderStillHandedToTheRelay(t *testing.T) {
	srv := testenv.StartRedis(t)
	sh := ordertest.On(t, srv.Client(t), activity.Activity{ID: 35, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tasks := &acceptedTasks{}
	deps := sh.Deps(tasks)
	deps.Store = &hungUp{Store: sh.Store, srv: srv, cancel: cancel}
	o, err := order.NewService(deps, order.Config{}).Place(ctx, order.PlaceRequest{ActivityID: 35, UserID: 7, Quantity: 1})
	if err != nil {
		t.Fatalf("Place: %v; want the order its accept made", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the request was not cancelled during the accept: the test did not hang up")
	}
	if len(tasks.nos) != 1 || tasks.nos[0] != o.No {
		t.Fatalf("relay got %v, want [%s]", tasks.nos, o.No)
	}
	out, err := sh.RDB.ZRange(context.Background(), rediskeys.For(35).Outbox, 0, -1).Result()
	if err != nil || len(out) != 1 || out[0] != o.No {
		t.Fatalf("outbox %v (%v), want [%s]", out, err, o.No)
	}
}

// A request whose client hangs up while its user lock is being obtained
// leaves the lock free: the user's next order goes through at once, not
// after the lock's ttl (5 s) or a busy refusal. The obtain's answer now
// arrives (the pipe waits for a call in flight), so the request holds
// the lock with its context cancelled; the accept it then sends is dropped
// unsent, and the lock library releases the lock in the background.
func TestService_place_clientHangsUpDuringTheLock_nextOrderNotBlocked(t *testing.T) {
	srv := testenv.StartRedis(t)
	sh := ordertest.On(t, srv.Client(t), activity.Activity{ID: 36, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 2})
	svc := sh.Service(ordertest.NoTasks{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv.Pause()
	go func() {
		time.Sleep(300 * time.Millisecond) // the lock's obtain went out long before
		cancel()
		time.Sleep(100 * time.Millisecond)
		srv.Resume()
	}()
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 36, UserID: 8, Quantity: 1})
	t.Logf("the hung-up request: %v, %v", o.No, err)
	start := time.Now()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := svc.Place(wctx, order.PlaceRequest{ActivityID: 36, UserID: 8, Quantity: 1}); err != nil {
		t.Fatalf("the next order: %v after %v", err, time.Since(start))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the next order waited %v for the lock the hung-up request left", d)
	}
}
