package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Locks.Obtain with a limit: within it the lock is held; over it the error
// is an *order.RateLimited saying when to retry, and nothing is taken.
func TestLocks_obtainWithLimit_overIt_rateLimitedAndNothingTaken(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	ctx := context.Background()
	locks := Locks{Locker: lc}
	o := order.LockOptions{Family: "order-user", NoFence: true, Limit: &order.RateLimit{Scope: "user", Who: "7", PerSecond: 2}}
	for i := range 2 {
		l, err := locks.Obtain(ctx, "order-user:1:7", time.Second, o)
		if err != nil {
			t.Fatalf("obtain %d within the limit: %v", i+1, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := locks.Obtain(ctx, "order-user:1:7", time.Second, o)
	var limited *order.RateLimited
	if !errors.As(err, &limited) || !errors.Is(err, order.ErrRateLimited) || limited.PerSecond != 2 ||
		limited.RetryAfter <= 0 || limited.RetryAfter > 500*time.Millisecond {
		t.Fatalf("third obtain at 2 a second: %v (%+v), want RateLimited retrying within 500ms", err, limited)
	}
	if _, err := lc.Holder(ctx, "order-user:1:7"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("a limited obtain took the lock: %v", err)
	}
}

// Accept with the per-user lock held runs accept.lua as the lock's finish:
// the order is accepted and the lock released by the same script. A lock
// lost before the accept (deleted behind the holder's back) does not lose
// the order: the accept runs by itself, as it is atomic on its own.
func TestStore_acceptWithHeldLock_acceptsAndReleases_evenIfTheLockWasLost(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	seed(t, rdb, time.Now().UnixMilli(), sale(flashMeta(), 10, nil))
	store := New(rdb, Config{})
	t.Cleanup(store.Close)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	locks := Locks{Locker: lc}

	scripts := func() int64 { // scripts Redis ran so far
		var n int64
		for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
				v, _, _ := strings.Cut(strings.TrimPrefix(line[strings.Index(line, ":")+1:], "calls="), ",")
				c, _ := strconv.ParseInt(v, 10, 64)
				n += c
			}
		}
		return n
	}
	for i, lose := range []bool{false, false, true} {
		key := "order-user:1:" + strconv.Itoa(7+i)
		held, err := locks.Obtain(ctx, key, 5*time.Second, order.LockOptions{NoFence: true})
		if err != nil {
			t.Fatal(err)
		}
		if lose {
			rdb.Del(ctx, "fs:lock:{"+key+"}")
		}
		before := scripts()
		acc, err := store.Accept(ctx, order.NewNo(1), order.PlaceRequest{ActivityID: 1, UserID: int64(7 + i), Quantity: 1}, held)
		if err != nil || acc.Order.No == "" || acc.Remaining != int64(9-i) {
			t.Fatalf("accept (lock lost: %v): %+v, %v", lose, acc, err)
		}
		if ran := scripts() - before; i == 1 && ran != 1 {
			t.Fatalf("the accept and the release ran as %d scripts, want 1", ran)
		}
		if _, err := store.Get(ctx, acc.Order.No); err != nil {
			t.Fatalf("the accepted order: %v", err)
		}
		if _, err := lc.Holder(ctx, key); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("the lock after the accept (lost: %v): %v, want released", lose, err)
		}
		if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("a second release: %v, want ErrNotHeld (Accept released it)", err)
		}
	}
}
