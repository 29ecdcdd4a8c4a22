package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

// Waiters in these tests use separate Clients (as separate processes would),
// so they are woken through Redis pub/sub, and a RecheckInterval of a minute,
// so a wake-up that was missed shows as a stall far past the test's bound.
const noRecheck = time.Minute

func TestObtain_isWokenByRelease(t *testing.T) {
	_, rdb, holder := setup(t)
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: noRecheck})
	ctx := context.Background()
	l := mustObtain(t, holder, "k", 30*time.Second)

	got := make(chan *lock.Lock)
	go func() {
		w, err := waiter.Obtain(ctx, "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("waiter obtained a held lock")
	default:
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w == nil || w.Fence() <= l.Fence() {
			t.Fatalf("waiter's lock %v: want a fence above %d", w, l.Fence())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release (the holder's ttl was 30s)")
	}
}

func TestObtain_crashedHolder_isReplacedWithinItsTTL(t *testing.T) {
	_, rdb, holder := setup(t)
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: noRecheck})
	// A holder that stops renewing and never releases, as a crashed one.
	mustObtain(t, holder, "k", 300*time.Millisecond, lock.WithoutRenewal())

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := waiter.Obtain(ctx, "k", time.Second); err != nil {
		t.Fatalf("waiter behind an expiring holder: %v", err)
	}
	if waited := time.Since(start); waited > 1500*time.Millisecond {
		t.Fatalf("waited %v for a 300ms lock to expire", waited)
	}
}

func TestObtain_silentDelete_isNoticedWithinRecheckInterval(t *testing.T) {
	_, rdb, _ := setup(t)
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: 100 * time.Millisecond})
	ctx := context.Background()
	// A lock key with no expiry that disappears without a release notice.
	if err := rdb.Set(ctx, "fs:lock:{k}", "someone", 0).Err(); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		rdb.Del(context.Background(), "fs:lock:{k}")
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := waiter.Obtain(wctx, "k", time.Second); err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("waited %v; the recheck interval is 100ms", waited)
	}
}

func TestObtain_canceledWaiter_returnsPromptly(t *testing.T) {
	_, _, c := setup(t)
	held := mustObtain(t, c, "k", 30*time.Second)
	defer held.Release(context.Background())

	// Two waiters on the same client: one waits on Redis, one in the local queue.
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Obtain(ctx, "k", time.Second)
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cancel()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, lock.ErrCanceled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled Obtain: got %v, want ErrCanceled and context.Canceled", err)
			}
		case <-time.After(time.Second):
			t.Fatal("canceled waiter did not return")
		}
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("canceled waiters took %v to return", d)
	}
}

func TestObtain_deadline_wrapsDeadlineExceeded(t *testing.T) {
	_, _, c := setup(t)
	held := mustObtain(t, c, "k", 30*time.Second)
	defer held.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Obtain(ctx, "k", time.Second)
	if !errors.Is(err, lock.ErrCanceled) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrCanceled and DeadlineExceeded", err)
	}
}

// Eight clients hand one lock around 200 times with a 30s ttl and no recheck:
// every handoff must come from a release notice. A single notice missed in
// the race between a release and a waiter subscribing would stall the run
// for 30s.
func TestObtain_handoffStorm_missesNoWakeups(t *testing.T) {
	_, rdb, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last int64
	for range 8 {
		c := newClient(t, rdb, lock.Config{RecheckInterval: noRecheck})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				l, err := c.Obtain(ctx, "k", 30*time.Second)
				if err != nil {
					t.Errorf("Obtain: %v", err)
					return
				}
				mu.Lock()
				if l.Fence() <= last {
					t.Errorf("fence %d after %d", l.Fence(), last)
				}
				last = l.Fence()
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
