package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// queueUntil waits until key's fair queue holds n waiters.
func queueUntil(t *testing.T, f *lock.Fair, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := f.Holder(context.Background(), key)
		if err == nil && h.Waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q: %+v, %v; want %d waiting", key, h, err, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type fairRun struct {
	mu     sync.Mutex
	order  []int
	fences []int64
}

// wait queues waiter i on f and records the order in which waiters get the lock.
func (r *fairRun) wait(t *testing.T, ctx context.Context, f *lock.Fair, key string, i int) <-chan error {
	done := make(chan error, 1)
	go func() {
		l, err := f.Obtain(ctx, key, 5*time.Second)
		if err != nil {
			done <- err
			return
		}
		r.mu.Lock()
		r.order = append(r.order, i)
		r.fences = append(r.fences, l.Fence())
		r.mu.Unlock()
		done <- l.Release(context.Background())
	}()
	return done
}

func fairClients(t *testing.T, rdb redis.UniversalClient, n int) []*lock.Fair {
	var out []*lock.Fair
	for range n {
		out = append(out, newClient(t, rdb, lock.Config{RecheckInterval: noRecheck}).Fair())
	}
	return out
}

// queueInOrder queues n waiters on key, one after another and spread over
// fs, behind held; releases held; and fails unless every waiter got the lock
// in arrival order with increasing fences.
func queueInOrder(t *testing.T, ctx context.Context, held *lock.Lock, fs []*lock.Fair, key string, n int) {
	t.Helper()
	var run fairRun
	var dones []<-chan error
	for i := range n {
		dones = append(dones, run.wait(t, ctx, fs[i%len(fs)], key, i))
		queueUntil(t, fs[0], key, i+1)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if len(run.order) != n {
		t.Fatalf("%s: %d of %d waiters got the lock", key, len(run.order), n)
	}
	for i, got := range run.order {
		if got != i || i > 0 && run.fences[i] <= run.fences[i-1] {
			t.Fatalf("%s: order %v fences %v, want 0..%d in arrival order with increasing fences", key, run.order, run.fences, n-1)
		}
	}
}

func TestFair_twentyWaiters_getItInArrivalOrder(t *testing.T) {
	_, rdb, c := setup(t)
	fs := fairClients(t, rdb, 4) // as four processes
	ctx := context.Background()
	held, err := c.Fair().TryObtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	queueInOrder(t, ctx, held, fs, "k", 20)
}

func TestFair_canceledWaiterInTheMiddle_leavesWithoutBlockingOthers(t *testing.T) {
	_, rdb, c := setup(t)
	fs := fairClients(t, rdb, 2)
	held, err := c.Fair().TryObtain(context.Background(), "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var run fairRun
	cancelCtx, cancel := context.WithCancel(context.Background())
	var dones []<-chan error
	for i := range 5 {
		ctx := context.Background()
		if i == 2 {
			ctx = cancelCtx
		}
		dones = append(dones, run.wait(t, ctx, fs[i%2], "k", i))
		queueUntil(t, fs[0], "k", i+1)
	}
	cancel()
	if err := <-dones[2]; !errors.Is(err, lock.ErrCanceled) {
		t.Fatalf("canceled waiter: %v", err)
	}
	queueUntil(t, fs[0], "k", 4)
	held.Release(context.Background())
	for i, d := range dones {
		if i == 2 {
			continue
		}
		select {
		case err := <-d:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d behind the canceled one never got the lock", i)
		}
	}
	if fmt.Sprint(run.order) != "[0 1 3 4]" {
		t.Fatalf("order %v, want [0 1 3 4]", run.order)
	}
}

func TestFair_TryObtain_respectsTheQueue(t *testing.T) {
	_, rdb, c := setup(t)
	f := c.Fair()
	ctx := context.Background()
	held, err := f.TryObtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var run fairRun
	done := run.wait(t, ctx, fairClients(t, rdb, 1)[0], "k", 0)
	queueUntil(t, f, "k", 1)
	// Expire the holder without a release: the lock is free, but a waiter is first.
	rdb.Del(ctx, "fs:flock:{k}")
	if _, err := f.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("TryObtain jumped the queue: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	held.Release(ctx)
}

const envFairKey = "LOCKTEST_FAIR_KEY"

// A holder killed with -9 never releases: the first of five waiters gets
// the lock within the holder's ttl, and the queue drains in order.
func TestFair_holderKilled9_nextGrantedWithinTTL_queueDrains(t *testing.T) {
	if testenv.ChildRole() == "fair-holder" {
		rdb := redis.NewClient(testenv.ClientOptions(os.Getenv(envRedisAddr)))
		if _, err := lock.New(rdb).Fair().TryObtain(context.Background(), "k", time.Second); err != nil {
			t.Fatal(err)
		}
		select {}
	}
	srv, rdb, c := setup(t)
	child := testenv.StartChild(t, "TestFair_holderKilled9_nextGrantedWithinTTL_queueDrains", "fair-holder",
		envRedisAddr+"="+srv.Addr())
	f := c.Fair()
	for {
		if h, err := f.Holder(context.Background(), "k"); err == nil && h.PID == child.PID() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fs := fairClients(t, rdb, 5)
	var run fairRun
	var dones []<-chan error
	for i := range 5 {
		dones = append(dones, run.wait(t, context.Background(), fs[i], "k", i))
		queueUntil(t, f, "k", i+1)
	}
	killed := time.Now()
	child.Kill()
	if err := <-dones[0]; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(killed); d > 1500*time.Millisecond {
		t.Fatalf("first waiter got the lock %v after the kill; the ttl is 1s", d)
	}
	for _, d := range dones[1:] {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(run.order) != "[0 1 2 3 4]" {
		t.Fatalf("order %v", run.order)
	}
}

// A waiter that crashes while queued is skipped once its place lapses.
func TestFair_waiterKilled9_isSkipped(t *testing.T) {
	if testenv.ChildRole() == "fair-waiter" {
		rdb := redis.NewClient(testenv.ClientOptions(os.Getenv(envRedisAddr)))
		c := lock.NewClient(rdb, lock.Config{FairWaiterLease: 300 * time.Millisecond})
		c.Fair().Obtain(context.Background(), "k", 10*time.Second)
		return
	}
	srv, rdb, c := setup(t)
	f := newClient(t, rdb, lock.Config{FairWaiterLease: 300 * time.Millisecond}).Fair()
	held, err := c.Fair().TryObtain(context.Background(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	child := testenv.StartChild(t, "TestFair_waiterKilled9_isSkipped", "fair-waiter", envRedisAddr+"="+srv.Addr())
	queueUntil(t, f, "k", 1)
	var run fairRun
	done := run.wait(t, context.Background(), f, "k", 1)
	queueUntil(t, f, "k", 2)
	child.Kill()
	time.Sleep(400 * time.Millisecond) // the dead waiter's place lapses
	held.Release(context.Background())
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the live waiter behind a dead one never got the lock")
	}
}
