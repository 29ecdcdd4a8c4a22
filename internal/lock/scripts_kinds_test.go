package lock

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// Seed state → run → compare state, for the reentrant and fair scripts.

func TestScripts_reentrant(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	k := newReentrantKeys(defaultPrefix, "k")
	obtain := func(owner, nonce string) []int64 {
		t.Helper()
		v, err := reentrantObtainScript.Run(ctx, rdb, []string{k.lock, k.fence}, "o:"+owner, 10000, 60000, "m", nonce).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	release := func(owner, nonce string) int64 {
		t.Helper()
		n, err := reentrantReleaseScript.Run(ctx, rdb, []string{k.lock}, "o:"+owner, k.channel, nonce).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	fields := func() map[string]string {
		m := rdb.HGetAll(ctx, k.lock).Val()
		delete(m, "~meta")
		return m
	}

	first := obtain("a", "n1")
	fence := strconv.FormatInt(first[1], 10)
	if first[0] != 1 || first[2] != 1 || !reflect.DeepEqual(fields(), map[string]string{"o:a": "1", "n:n1": "1", "~fence": fence}) {
		t.Fatalf("first obtain: %v, %v", first, fields())
	}
	if got := obtain("a", "n2"); got[0] != 1 || got[1] != first[1] || got[2] != 2 {
		t.Fatalf("nested obtain: %v", got)
	}
	before := fields()
	if got := obtain("b", "n3"); got[0] != 0 || got[1] <= 0 || !reflect.DeepEqual(fields(), before) {
		t.Fatalf("other owner: %v, state %v", got, fields())
	}
	if n := release("a", "nope"); n != -1 || !reflect.DeepEqual(fields(), before) {
		t.Fatalf("release of a hold that is not there: %d, state %v", n, fields())
	}
	n, err := reentrantRefreshScript.Run(ctx, rdb, []string{k.lock}, "o:a", 30000, "12345").Int64()
	if err != nil || n != 0 || rdb.PTTL(ctx, k.lock).Val() > 10*time.Second {
		t.Fatalf("refresh with another hold's fence: %d, %v", n, err)
	}
	if n := release("a", "n2"); n != 1 || !reflect.DeepEqual(fields(), map[string]string{"o:a": "1", "n:n1": "1", "~fence": fence}) {
		t.Fatalf("inner release: %d, %v", n, fields())
	}
	if n := release("a", "n1"); n != 0 || rdb.Exists(ctx, k.lock).Val() != 0 {
		t.Fatalf("last release: %d, exists %d", n, rdb.Exists(ctx, k.lock).Val())
	}
}

func TestScripts_fair(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	k := newFairKeys(defaultPrefix, "k")
	nowMs := func() int64 { return rdb.Time(ctx).Val().UnixMilli() }
	queue := func(entries ...[2]any) { // token, deadline offset in ms
		t.Helper()
		for i, e := range entries {
			rdb.ZAdd(ctx, k.queue, redis.Z{Score: float64(i + 1), Member: e[0]})
			rdb.HSet(ctx, k.waiters, e[0], strconv.FormatInt(nowMs()+int64(e[1].(int)), 10)+"|5000|meta-"+e[0].(string))
		}
	}
	holder := func() string { return rdb.HGet(ctx, k.lock, "token").Val() }
	queued := func() []string { return rdb.ZRange(ctx, k.queue, 0, -1).Val() }

	t.Run("release grants the first live waiter, dropping dead ones ahead of it", func(t *testing.T) {
		rdb.FlushAll(ctx)
		rdb.HSet(ctx, k.lock, "token", "h", "fence", "1", "meta", "m")
		queue([2]any{"dead", -1000}, [2]any{"w1", 5000}, [2]any{"w2", 5000})
		sub := rdb.Subscribe(ctx, k.channel)
		defer sub.Close()
		sub.Receive(ctx)
		n, err := fairReleaseScript.Run(ctx, rdb, k.all(), "h", k.channel, 60000).Int64()
		if err != nil || n != 1 || holder() != "w1" || !reflect.DeepEqual(queued(), []string{"w2"}) {
			t.Fatalf("release: %d %v, holder %q, queue %v", n, err, holder(), queued())
		}
		if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "w1" {
			t.Fatalf("grant notice: %v %v", msg, err)
		}
		if ttl := rdb.PTTL(ctx, k.lock).Val(); ttl <= 4*time.Second || ttl > 5*time.Second {
			t.Fatalf("granted with ttl %v, want the waiter's own 5s", ttl)
		}
		if rdb.HGet(ctx, k.lock, "meta").Val() != "meta-w1" {
			t.Fatalf("granted holder's metadata: %q", rdb.HGet(ctx, k.lock, "meta").Val())
		}
	})

	t.Run("release by a non-holder changes nothing", func(t *testing.T) {
		rdb.FlushAll(ctx)
		rdb.HSet(ctx, k.lock, "token", "h", "fence", "1", "meta", "m")
		queue([2]any{"w1", 5000})
		if n, _ := fairReleaseScript.Run(ctx, rdb, k.all(), "x", k.channel, 60000).Int64(); n != 0 || holder() != "h" || len(queued()) != 1 {
			t.Fatalf("release by x: %d, holder %q, queue %v", n, holder(), queued())
		}
	})

	t.Run("a free lock goes to the head of the queue, not to a newcomer", func(t *testing.T) {
		rdb.FlushAll(ctx)
		queue([2]any{"w1", 5000})
		got, err := fairObtainScript.Run(ctx, rdb, k.all(), "new", 5000, 60000, "m", 2000, k.channel).Int64Slice()
		if err != nil || got[0] != 0 || got[2] != 0 || holder() != "w1" || !reflect.DeepEqual(queued(), []string{"new"}) {
			t.Fatalf("newcomer: %v %v, holder %q, queue %v", got, err, holder(), queued())
		}
		// The head confirms its grant: held, with its ttl restarted.
		got, _ = fairObtainScript.Run(ctx, rdb, k.all(), "w1", 7000, 60000, "m", 2000, k.channel).Int64Slice()
		if got[0] != 1 || rdb.PTTL(ctx, k.lock).Val() <= 6*time.Second {
			t.Fatalf("confirm: %v, ttl %v", got, rdb.PTTL(ctx, k.lock).Val())
		}
	})

	t.Run("a granted waiter that leaves passes the grant on", func(t *testing.T) {
		rdb.FlushAll(ctx)
		rdb.HSet(ctx, k.lock, "token", "w1", "fence", "1", "meta", "m")
		queue([2]any{"w2", 5000})
		n, err := fairLeaveScript.Run(ctx, rdb, k.all(), "w1", k.channel, 60000).Int64()
		if err != nil || n != 1 || holder() != "w2" || len(queued()) != 0 {
			t.Fatalf("leave: %d %v, holder %q, queue %v", n, err, holder(), queued())
		}
	})

	t.Run("trying never queues", func(t *testing.T) {
		rdb.FlushAll(ctx)
		rdb.HSet(ctx, k.lock, "token", "h", "fence", "1", "meta", "m")
		rdb.PExpire(ctx, k.lock, 5*time.Second)
		got, _ := fairObtainScript.Run(ctx, rdb, k.all(), "t", 5000, 60000, "m", 0, k.channel).Int64Slice()
		if got[0] != 0 || got[2] != -1 || len(queued()) != 0 {
			t.Fatalf("try: %v, queue %v", got, queued())
		}
	})
}
