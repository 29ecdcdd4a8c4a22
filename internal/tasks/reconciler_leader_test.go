package tasks

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Two reconcilers, as in two workers: one leads at a time; when it stops the
// other takes over.
func TestReconciler_oneLeaderAtATime(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	store := ordertest.On(t, rdb).Store
	var mu sync.Mutex
	passes := map[string]int{}
	start := func(name string) context.CancelFunc {
		locks := lock.New(rdb)
		t.Cleanup(func() { locks.Close() })
		r := NewReconciler(locks, store, &recorded{}, &recorded{}, func(context.Context) ([]int64, error) {
			mu.Lock()
			passes[name]++
			mu.Unlock()
			return nil, nil
		}, ordertest.Log(), nil)
		r.Interval = 20 * time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		go r.Run(ctx)
		return cancel
	}
	stopA := start("a")
	time.Sleep(100 * time.Millisecond)
	stopB := start("b")
	defer stopB()
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	a, b := passes["a"], passes["b"]
	mu.Unlock()
	if a == 0 || b != 0 {
		t.Fatalf("passes while a leads: a %d, b %d", a, b)
	}
	stopA()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		b = passes["b"]
		mu.Unlock()
		if b > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never took over after a stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A leader that loses its lock (here: the key is gone, as after an expiry
// while the worker was paused) stops the pass it is in, rather than writing
// alongside the next leader.
func TestReconciler_leadershipLost_stopsThePassInProgress(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	sh := ordertest.On(t, rdb)
	inPass := make(chan context.Context, 8)
	r := NewReconciler(sh.Locks, sh.Store, &recorded{}, &recorded{}, func(ctx context.Context) ([]int64, error) {
		inPass <- ctx
		<-ctx.Done() // a long pass
		return nil, ctx.Err()
	}, testLog(t), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	pass := <-inPass
	keys := rdb.Keys(ctx, "*worker:reconciler*").Val()
	if len(keys) == 0 {
		t.Fatal("no leader lock in Redis")
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pass.Done():
	case <-time.After(15 * time.Second): // the watchdog notices at its next renewal (ttl/3)
		t.Fatal("the pass went on after its leader lock was lost")
	}
}
