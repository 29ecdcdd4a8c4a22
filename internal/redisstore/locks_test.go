package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/redisbatch"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// rate_limit.lua is redis_rate's GCRA with another reply, on redis_rate's
// keys: requests charged by either draw on one budget per user, a burst of
// rps is allowed and no more, both agree on when to retry, and the budget
// comes back at rps a second.
func TestRateLimitGuard_agreesWithRedisRate_oneSharedBudget(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	limiter := redis_rate.NewLimiter(rdb)
	guard := redisbatch.NewMerged(mustSource("rate_limit"))
	const rps = 5
	limit := redis_rate.PerSecond(rps)
	ours := func(who string) (bool, time.Duration) {
		t.Helper()
		res, err := guard.Run(ctx, rdb, []string{rediskeys.RateLimitStored("user", who)}, rps, rps, 1, 1).Result()
		if err == redis.Nil {
			return true, 0
		}
		if err != nil {
			t.Fatal(err)
		}
		secs, _ := strconv.ParseFloat(res.([]any)[0].(string), 64)
		return false, time.Duration(secs * float64(time.Second))
	}
	theirs := func(who string) (bool, time.Duration) {
		t.Helper()
		res, err := limiter.Allow(ctx, rediskeys.RateLimit("user", who), limit)
		if err != nil {
			t.Fatal(err)
		}
		return res.Allowed == 1, res.RetryAfter
	}

	// One burst, alternating: rps allowed in all, the first rps.
	var pattern []bool
	for i := range 4 * rps {
		allow := ours
		if i%2 == 1 {
			allow = theirs
		}
		ok, _ := allow("1")
		pattern = append(pattern, ok)
	}
	for i, ok := range pattern {
		if ok != (i < rps) {
			t.Fatalf("burst of %d at %d a second, alternating: allowed %v, want the first %d", len(pattern), rps, pattern, rps)
		}
	}
	// Refused, both say when to retry: at most 1/rps from now, and alike.
	okA, afterA := ours("1")
	okB, afterB := theirs("1")
	if okA || okB || afterA <= 0 || afterA > time.Second/rps || (afterA-afterB).Abs() > 50*time.Millisecond {
		t.Fatalf("over the limit: ours %v retry %v, redis_rate %v retry %v", okA, afterA, okB, afterB)
	}
	// After the retry time, one more each way, then refused again.
	time.Sleep(afterA + 10*time.Millisecond)
	if ok, _ := ours("1"); !ok {
		t.Fatal("ours refused after the retry time")
	}
	time.Sleep(time.Second/rps + 10*time.Millisecond)
	if ok, _ := theirs("1"); !ok {
		t.Fatal("redis_rate refused after the retry time")
	}
	if ok, _ := ours("1"); ok {
		t.Fatal("a second request within one interval allowed")
	}
	// Another user has a budget of their own.
	if ok, _ := ours("2"); !ok {
		t.Fatal("user 2 limited by user 1")
	}
}

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
