package order_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A wait for a lock that ends says what it waited on, so that the API's
// 503 can name it. Past the request's deadline, a holder that kept the lock
// is the request's own end as an ErrLockWait, and no ErrUnavailable; a
// Redis frozen under the wait (SIGSTOP) is ErrUnavailable as well — for an
// order that takes the user's lock (Config.HoldUserLock) and for a group
// opened alike. Within the request, LockWait running out on a frozen Redis
// is ErrUnavailable, not ErrBusy: no other request was in progress.
func TestService_lockWaitEnded_saysWhetherAHolderOrRedisKeptIt(t *testing.T) {
	redis := testenv.StartRedis(t)
	sh := ordertest.On(t, redis.Client(t),
		activity.Activity{ID: 41, Type: activity.Seckill, TotalStock: 100, PerUserLimit: 10},
		activity.Activity{ID: 42, Type: activity.GroupBuy, TotalStock: 100, PerUserLimit: 10, GroupSize: 3, GroupTTL: time.Minute})
	holding := order.NewService(sh.Deps(ordertest.NoTasks{}), order.Config{HoldUserLock: true})
	impatient := order.NewService(sh.Deps(ordertest.NoTasks{}), order.Config{HoldUserLock: true, LockWait: 200 * time.Millisecond})
	const user = 9
	waits := map[string]func(*order.Service, context.Context) error{
		"an order": func(svc *order.Service, ctx context.Context) error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 41, UserID: user, Quantity: 1})
			return err
		},
		"a group opened": func(svc *order.Service, ctx context.Context) error {
			_, _, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 42, UserID: user, Quantity: 1})
			return err
		},
	}
	within := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}

	// Another process holds the user's lock in both sales, the way
	// lockUser names it.
	other := lock.New(sh.RDB)
	defer other.Close()
	for _, set := range []string{"order-user:41", "order-user:42"} {
		held, err := redisstore.Locks{Locker: other}.Obtain(context.Background(), "9", 10*time.Second,
			order.LockOptions{Family: "order-user", NoFence: true, Set: set})
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(context.Background())
	}
	for what, wait := range waits {
		err := wait(holding, within(300*time.Millisecond))
		if !errors.Is(err, order.ErrLockWait) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, order.ErrUnavailable) {
			t.Errorf("%s behind a holder past its deadline: %v, want an ErrLockWait of the deadline, not ErrUnavailable", what, err)
		}
	}

	redis.Pause()
	defer redis.Resume()
	for what, wait := range waits {
		err := wait(holding, within(300*time.Millisecond))
		if !errors.Is(err, order.ErrLockWait) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, order.ErrUnavailable) {
			t.Errorf("%s with Redis frozen, past its deadline: %v, want an ErrLockWait of the deadline and ErrUnavailable", what, err)
		}
		err = wait(impatient, within(5*time.Second))
		if !errors.Is(err, order.ErrUnavailable) || errors.Is(err, order.ErrBusy) {
			t.Errorf("%s with Redis frozen, past LockWait: %v, want ErrUnavailable, not ErrBusy", what, err)
		}
	}
}
