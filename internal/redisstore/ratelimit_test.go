package redisstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func newLimiter(t *testing.T, rdb *redis.Client) *Limiter {
	t.Helper()
	b := redispipe.New(rdb)
	t.Cleanup(b.Close)
	return NewLimiter(rdb, b)
}

// rate_limit.lua is redis_rate's GCRA kept elsewhere: called in lockstep
// with redis_rate (the oracle, each on its own client), it allows the same
// requests and says the same retry time, and the budget comes back at rps a
// second for both.
func TestLimiter_decidesAsRedisRate(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	ours := newLimiter(t, rdb)
	theirs := redis_rate.NewLimiter(rdb)
	const rps = 5
	step := func(what string) {
		t.Helper()
		okA, afterA, err := ours.Allow(ctx, "user", "1", rps)
		if err != nil {
			t.Fatal(err)
		}
		res, err := theirs.Allow(ctx, "oracle", redis_rate.PerSecond(rps))
		if err != nil {
			t.Fatal(err)
		}
		okB, afterB := res.Allowed == 1, res.RetryAfter
		if okA != okB || (!okA && (afterA <= 0 || (afterA-afterB).Abs() > 50*time.Millisecond)) {
			t.Fatalf("%s: ours allowed %v retry %v, redis_rate allowed %v retry %v", what, okA, afterA, okB, afterB)
		}
	}
	for i := range 2 * rps {
		step("request " + strconv.Itoa(i+1) + " of a burst")
	}
	okA, afterA, _ := ours.Allow(ctx, "user", "1", rps)
	if okA || afterA > time.Second/rps {
		t.Fatalf("over the limit: allowed %v, retry after %v, want refused within 1/%d s", okA, afterA, rps)
	}
	if _, err := theirs.Allow(ctx, "oracle", redis_rate.PerSecond(rps)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(afterA + 10*time.Millisecond)
	step("after the retry time")
	step("a second request within one interval")
	// Another user has a budget of their own.
	if ok, _, _ := ours.Allow(ctx, "user", "2", rps); !ok {
		t.Fatal("user 2 limited by user 1")
	}
	// And another scope too.
	if ok, _, _ := ours.Allow(ctx, "ip", "1", rps); !ok {
		t.Fatal("ip 1 limited by user 1")
	}
}

// An order's script and the middleware's limiter draw on one budget:
// requests charged by either count against the other.
func TestLimiter_andTheOrdersScript_shareOneBudget(t *testing.T) {
	s := onSale(t)
	ctx := context.Background()
	limiter := newLimiter(t, s.rdb)
	const rps = 3
	for i := range rps - 1 {
		if ok, _, err := limiter.Allow(ctx, "user", "7", rps); !ok || err != nil {
			t.Fatalf("request %d within the limit: %v %v", i+1, ok, err)
		}
	}
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, rps)); err != nil {
		t.Fatalf("the last order within the budget: %v", err)
	}
	if ok, after, _ := limiter.Allow(ctx, "user", "7", rps); ok || after <= 0 {
		t.Fatalf("a request over the budget the order spent: allowed %v, retry %v", ok, after)
	}
	var limited *order.RateLimited
	if _, err := s.store.Accept(ctx, order.NewNo(1), buy(7), turn(7, rps)); !errors.As(err, &limited) ||
		limited.RetryAfter <= 0 || limited.RetryAfter > time.Second/rps {
		t.Fatalf("an order over the budget: %v (%+v)", err, limited)
	}
}

// Many concurrent requests of one user (merged into a few script runs)
// get the burst and no more: each call of a batch sees what the ones before
// it took. So also after SCRIPT FLUSH (the batcher loads the script again).
func TestLimiter_concurrentBurst_allowsTheBurstOnly(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	limiter := newLimiter(t, rdb)
	const rps, callers = 10, 64
	for round, who := range []string{"42", "43"} {
		if round == 1 {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, _, err := limiter.Allow(ctx, "user", who, rps)
				if err != nil {
					t.Error(err)
				}
				if ok {
					allowed.Add(1)
				}
			}()
		}
		wg.Wait()
		// What came back while the calls ran: one every 1/rps seconds.
		refill := int64(time.Since(start) * rps / time.Second)
		if got := allowed.Load(); got < rps || got > rps+refill {
			t.Fatalf("round %d: %d concurrent requests at %d a second: %d allowed, want %d (+%d refilled meanwhile)", round, callers, rps, got, rps, refill)
		}
	}
}

// A client's state kept in the window before the current one still limits
// it (the two windows are read), old windows are unlinked, and every
// window expires.
func TestLimiter_acrossWindows(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	limiter := newLimiter(t, rdb)
	// One a second, a burst of one: windows of 1 s. Spend it late in a
	// second...
	const rps = 1
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next.Add(-200 * time.Millisecond)))
	if ok, _, err := limiter.Allow(ctx, "user", "9", rps); !ok || err != nil {
		t.Fatalf("the first request: %v %v", ok, err)
	}
	// ...and ask again early in the next: what it spent is in the last window.
	time.Sleep(time.Until(next.Add(100 * time.Millisecond)))
	ok, after, err := limiter.Allow(ctx, "user", "9", rps)
	if ok || err != nil || after <= 0 || after > time.Second {
		t.Fatalf("in the next window, before the refill: allowed %v, retry %v, %v; want refused", ok, after, err)
	}
	// Requests over a few seconds (each of a new user, so each window is
	// written) leave the current and the last window, each to expire.
	for i := range 30 {
		limiter.Allow(ctx, "user", strconv.Itoa(100+i), rps)
		time.Sleep(100 * time.Millisecond)
	}
	keys, err := rdb.Keys(ctx, "fs:rl:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 || len(keys) > 2 {
		t.Fatalf("windows left after 3 s of requests: %v, want the current and at most the last", keys)
	}
	for _, k := range keys {
		if ttl := rdb.TTL(ctx, k).Val(); ttl <= 0 || ttl > 3*time.Second {
			t.Fatalf("window %s expires in %v, want within 3 s", k, ttl)
		}
	}
}

// On Redis Cluster a scope's clients are spread over RateShards bases (one
// slot each) for the middleware's limiter, and an order's limit is the
// user's budget in its sale, charged by place.lua in the sale's (shard's)
// slot with the accept: one script an order, with or without the user
// lock, exact per user and sale, and apart from the user's other requests
// and other sales.
func TestLimiter_onCluster_spreadAndOrdersChargedInTheSalesSlot(t *testing.T) {
	cluster := testenv.StartRedisCluster(t, 3)
	rdb := cluster.Client(t)
	ctx := context.Background()
	b := redispipe.New(rdb)
	t.Cleanup(b.Close)
	limiter := NewLimiter(rdb, b)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	keeper := stock.New(rdb, stock.Config{})
	store := New(rdb, Config{Locks: lc, Shards: keeper})
	t.Cleanup(store.Close)
	for id, shards := range map[int64]int{1: 1, 2: 3} {
		a := activity.Activity{ID: id, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 100,
			PerUserLimit: 100, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
			PaymentTTL: time.Minute, Status: activity.Published, Shards: shards}
		if _, err := keeper.Load(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if RateShards(rdb) < 2 {
		t.Fatalf("RateShards on a cluster client: %d", RateShards(rdb))
	}
	evalshas := func() int64 {
		var n int64
		for _, node := range cluster.Nodes {
			st, err := testenv.CommandStats(ctx, node.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			n += st["evalsha"].Calls
		}
		return n
	}
	// Scripts loaded on every master first (a NOSCRIPT's rerun would count).
	for u := int64(1000); u < 1012; u++ {
		for _, sale := range []int64{1, 2} {
			req := buy(u)
			req.ActivityID = sale
			if _, err := store.Accept(ctx, order.NewNo(sale), req, turn(u, 10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const rps = 2
	slots := map[int64]bool{}
	for u := range 8 {
		user := int64(u + 1)
		who := strconv.FormatInt(user, 10)
		slots[rdb.ClusterKeySlot(ctx, rediskeys.RateLimit("user", who, RateShards(rdb))).Val()] = true
		tr := turn(user, rps)
		tr.Lock = u%2 == 0 // with the user lock, and without (ORDER_USER_LOCK=false)
		for _, sale := range []int64{1, 2} {
			req := buy(user)
			req.ActivityID = sale
			for i := range rps {
				before := evalshas()
				if _, err := store.Accept(ctx, order.NewNo(sale), req, tr); err != nil {
					t.Fatalf("user %d's order %d in sale %d, within its budget (lock %v): %v", user, i+1, sale, tr.Lock, err)
				}
				if n := evalshas() - before; n != 1 {
					t.Fatalf("user %d's order in sale %d ran %d scripts, want 1: the limit, the lock and the accept in one", user, sale, n)
				}
			}
			var limited *order.RateLimited
			if _, err := store.Accept(ctx, order.NewNo(sale), req, tr); !errors.As(err, &limited) || limited.RetryAfter <= 0 {
				t.Fatalf("user %d's order in sale %d over its budget (lock %v): %v, want RateLimited", user, sale, tr.Lock, err)
			}
			shard := activity.ShardOf(user, map[int64]int{1: 1, 2: 3}[sale])
			if held, _ := rdb.HGet(ctx, rediskeys.ForShard(sale, shard, map[int64]int{1: 1, 2: 3}[sale]).Users, who).Int64(); held != rps {
				t.Fatalf("user %d holds %d units of sale %d, want %d: the refused order took none", user, held, sale, rps)
			}
		}
		// The user's other requests have their budget of their own.
		for i := range rps {
			if ok, _, err := limiter.Allow(ctx, "user", who, rps); !ok || err != nil {
				t.Fatalf("user %s's request %d: %v %v", who, i+1, ok, err)
			}
		}
		if ok, _, err := limiter.Allow(ctx, "user", who, rps); ok || err != nil {
			t.Fatalf("user %s's request over the budget: %v %v", who, ok, err)
		}
	}
	if len(slots) < 2 {
		t.Fatalf("8 users' rate limits in %d slot(s): not spread", len(slots))
	}
}
