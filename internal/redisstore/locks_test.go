package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// onSale starts a Redis holding a flash sale of 10 units (activity 1), with
// an order store and a lock client on it.
func onSale(t *testing.T) (*redis.Client, *Store, *lock.Client) {
	rdb := testenv.StartRedis(t).Client(t)
	seed(t, rdb, time.Now().UnixMilli(), sale(flashMeta(), 10, nil))
	store := New(rdb, Config{})
	t.Cleanup(store.Close)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	return rdb, store, lc
}

// Accept with the per-user lock held runs accept.lua as the lock's finish:
// the order is accepted and the lock released by the same script. A lock
// lost before the accept (deleted behind the holder's back) does not lose
// the order: the accept runs by itself, as it is atomic on its own.
func TestStore_acceptWithHeldLock_acceptsAndReleases_evenIfTheLockWasLost(t *testing.T) {
	rdb, store, lc := onSale(t)
	ctx := context.Background()
	locks := Locks{Locker: lc}

	scripts := func() int64 { return testenv.ScriptCalls(t, rdb) } // scripts Redis ran so far
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

// sentTwice is a go-redis hook that sends every pipeline a second time
// after it ran, as go-redis does after a read timeout whose commands had
// in fact run; the caller sees the second answers.
type sentTwice struct{}

func (sentTwice) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (sentTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (sentTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := next(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// An accept under a deferred user lock whose answer was lost and whose
// pipeline go-redis sent again: the second run charges the rate limit
// again and, at 1 a second, is refused — but the first run accepted the
// order, and Accept answers that order, not 429. One order, one unit.
func TestStore_acceptDeferred_sentAgainAndRefusedByTheLimit_answersTheOrderItMade(t *testing.T) {
	rdb, store, lc := onSale(t)
	ctx := context.Background()
	locks := Locks{Locker: lc}
	o := order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:1", Defer: true,
		Limit: &order.RateLimit{Scope: "user", Who: "7", PerSecond: 1}}
	warm := o
	warm.Limit = &order.RateLimit{Scope: "user", Who: "8", PerSecond: 1}
	held, err := locks.Obtain(ctx, "8", 5*time.Second, warm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Accept(ctx, order.NewNo(1), order.PlaceRequest{ActivityID: 1, UserID: 8, Quantity: 1}, held); err != nil {
		t.Fatal(err) // loads the scripts: no NOSCRIPT round below
	}

	rdb.AddHook(sentTwice{})
	held, err = locks.Obtain(ctx, "7", 5*time.Second, o)
	if err != nil {
		t.Fatal(err)
	}
	no := order.NewNo(1)
	acc, err := store.Accept(ctx, no, order.PlaceRequest{ActivityID: 1, UserID: 7, Quantity: 1}, held)
	if err != nil || acc.Order.No != no || acc.Order.UserID != 7 {
		t.Fatalf("accept sent twice: %+v, %v; want the order %s", acc.Order, err, no)
	}
	if n := rdb.HLen(ctx, act.Orders).Val(); n != 2 {
		t.Fatalf("%d orders in Redis, want 2 (the warm-up's and this one)", n)
	}
	if u := rdb.HGet(ctx, act.Users, "7").Val(); u != "1" || rdb.Get(ctx, act.Stock).Val() != "8" {
		t.Fatalf("user 7 holds %q units, stock %q; want 1 and 8", u, rdb.Get(ctx, act.Stock).Val())
	}
}

// readRefused, Accept's read of an order the rate limit refused, answers
// as Get does: the order while on the outbox, persisted once off it, not
// found for a number never used — and concurrent reads share one script
// run per pipeline.
func TestStore_readRefused_answersAsGet(t *testing.T) {
	rdb, store, _ := onSale(t)
	ctx := context.Background()
	no := order.NewNo(1)
	if _, err := store.Accept(ctx, no, order.PlaceRequest{ActivityID: 1, UserID: 9, Quantity: 2}, nil); err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		want, err := store.Get(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.readRefused(ctx, no)
		if err != nil || got != want {
			t.Fatalf("%s: readRefused %+v, %v; Get %+v", what, got, err, want)
		}
	}
	same("on the outbox")
	if got, _ := store.readRefused(ctx, no); got.Persisted || got.UserID != 9 || got.Quantity != 2 {
		t.Fatalf("on the outbox: %+v", got)
	}
	if err := rdb.ZRem(ctx, act.Outbox, no).Err(); err != nil {
		t.Fatal(err)
	}
	same("off the outbox")
	if got, _ := store.readRefused(ctx, no); !got.Persisted {
		t.Fatalf("off the outbox, not persisted: %+v", got)
	}
	if _, err := store.readRefused(ctx, order.NewNo(1)); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("a number never used: %v, want ErrNotFound", err)
	}

	before := testenv.ScriptCalls(t, rdb)
	const n = 64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := store.readRefused(ctx, no); err != nil || got.No != no {
				t.Errorf("concurrent read: %+v, %v", got, err)
			}
		}()
	}
	wg.Wait()
	if runs := testenv.ScriptCalls(t, rdb) - before; runs >= n {
		t.Errorf("%d concurrent reads ran %d scripts: not merged", n, runs)
	}
}
