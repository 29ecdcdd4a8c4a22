package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

// obtainAsync starts Obtain in a goroutine and waits until it is queued.
func obtainAsync(t *testing.T, c *lock.Client, key string, ttl time.Duration, opts ...lock.Option) <-chan *lock.Lock {
	t.Helper()
	ch := make(chan *lock.Lock, 1)
	go func() {
		l, err := c.Obtain(context.Background(), key, ttl, opts...)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	time.Sleep(30 * time.Millisecond) // let it queue behind the holder
	return ch
}

func recv(t *testing.T, ch <-chan *lock.Lock) *lock.Lock {
	t.Helper()
	select {
	case l := <-ch:
		if l == nil {
			t.Fatal("waiter failed")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not get the lock")
		return nil
	}
}

func TestCohort_localHandoff_nextFenceSameRedisHold_ownLostChannel(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	// A block of fences for handoffs is reserved when the obtaining waiter
	// already has others queued behind it: the second holder here.
	zeroth, err := c.Obtain(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	firstCh := obtainAsync(t, c, "k", 300*time.Millisecond)
	waiter := obtainAsync(t, c, "k", 300*time.Millisecond)
	if err := zeroth.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := recv(t, firstCh)
	valueBefore := rdb.Get(ctx, "fs:lock:{k}").Val()

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := recv(t, waiter)
	if second.Fence() <= first.Fence() {
		t.Fatalf("handed-over fence %d not above %d", second.Fence(), first.Fence())
	}
	if v := rdb.Get(ctx, "fs:lock:{k}").Val(); v != valueBefore {
		t.Fatalf("Redis value changed on a local handoff: the lock went through Redis")
	}

	// The hold is lost under the second holder: only its Lost closes.
	rdb.Del(ctx, "fs:lock:{k}")
	waitClosed(t, second.Lost(), time.Second, "second holder's Lost")
	assertOpen(t, first.Lost(), "first holder's Lost (it released before the loss)")
	if err := second.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release of the lost holding: %v", err)
	}
	if err := first.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release of the first holding: %v", err)
	}
}

func TestCohort_budget_releasesInRedisAfterMaxHandoffs(t *testing.T) {
	_, rdb, _ := setup(t)
	c := newClient(t, rdb, lock.Config{MaxHandoffs: 2})
	ctx := context.Background()
	l, err := c.Obtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var waiters []<-chan *lock.Lock
	for range 6 {
		waiters = append(waiters, obtainAsync(t, c, "k", 5*time.Second))
	}
	owners := map[string]bool{rdb.Get(ctx, "fs:lock:{k}").Val(): true}
	last := l.Fence()
	for _, w := range waiters {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l = recv(t, w)
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		owners[rdb.Get(ctx, "fs:lock:{k}").Val()] = true
	}
	l.Release(ctx)
	// 7 holders with at most 2 handoffs per Redis hold: at least 3 holds.
	if len(owners) < 3 {
		t.Fatalf("%d Redis holds for 7 holders; MaxHandoffs 2 allows at most 3 holders each", len(owners))
	}
}

func TestCohort_waiterAskingForOtherTTL_getsItThroughRedis(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w := obtainAsync(t, c, "k", 7*time.Second)
	before := rdb.Get(ctx, "fs:lock:{k}").Val()
	l.Release(ctx)
	next := recv(t, w)
	defer next.Release(ctx)
	if after := rdb.Get(ctx, "fs:lock:{k}").Val(); after == before {
		t.Fatal("lock handed over locally to a waiter that asked for another ttl")
	}
	if pttl := rdb.PTTL(ctx, "fs:lock:{k}").Val(); pttl <= 5*time.Second {
		t.Fatalf("ttl %v: the waiter's own 7s ttl was not applied", pttl)
	}
}

// A process whose goroutines hammer a key must not starve another process:
// the cohort budget and the yield let it in.
func TestCohort_busyProcess_doesNotStarveAnother(t *testing.T) {
	_, rdb, busy := setup(t)
	other := newClient(t, rdb, lock.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := busy.Obtain(ctx, "k", time.Second)
				if err != nil {
					return
				}
				time.Sleep(50 * time.Microsecond)
				l.Release(context.Background())
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	for i := range 5 {
		octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
		l, err := other.Obtain(octx, "k", time.Second)
		ocancel()
		if err != nil {
			t.Fatalf("round %d: the other process starved: %v", i, err)
		}
		l.Release(ctx)
	}
	cancel()
	wg.Wait()
}

// Waiters give up at random moments, some exactly while the lock is being
// handed to them. Nothing may deadlock, and exclusion must hold.
func TestCohort_cancelRacingHandoff_neitherDeadlocksNorOverlaps(t *testing.T) {
	_, rdb, _ := setup(t)
	path := filepath.Join(t.TempDir(), "crit.log")
	log := openCritLog(t, path)
	clients := []*lock.Client{newClient(t, rdb, lock.Config{}), newClient(t, rdb, lock.Config{})}
	// Two seconds, and on until both outcomes were seen (a loaded machine's
	// round trips can outlast every short wait: CI saw 0 obtained once), at
	// most 15 s.
	deadline, hardStop := time.Now().Add(2*time.Second), time.Now().Add(15*time.Second)
	var obtained, gaveUp atomic.Int64
	running := func() bool {
		now := time.Now()
		return now.Before(hardStop) && (now.Before(deadline) || obtained.Load() == 0 || gaveUp.Load() == 0)
	}
	var wg sync.WaitGroup
	for i := range 32 {
		c := clients[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; running(); n++ {
				wait := time.Duration(rand.IntN(4000)) * time.Microsecond
				if n%8 == 7 { // now and then long enough to get it on a slow machine
					wait = time.Duration(rand.IntN(100)) * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				l, err := c.Obtain(ctx, "k", time.Second)
				cancel()
				if err != nil {
					if !errors.Is(err, lock.ErrCanceled) {
						t.Errorf("Obtain: %v", err)
						return
					}
					gaveUp.Add(1)
					continue
				}
				obtained.Add(1)
				log.write("E", l.Fence(), "p/"+string(rune('a'+i)))
				log.write("X", l.Fence(), "p/"+string(rune('a'+i)))
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("deadlock: contenders still running 5 s after their hard stop")
	}
	checkCritLog(t, path)
	if obtained.Load() == 0 || gaveUp.Load() == 0 {
		t.Fatalf("obtained %d, gave up %d: the race was not exercised", obtained.Load(), gaveUp.Load())
	}
	// Afterwards the key is free: nothing leaked a hold or a gate.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, c := range clients {
		l, err := c.Obtain(ctx, "k", time.Second)
		if err != nil {
			t.Fatalf("after the storm: %v", err)
		}
		l.Release(ctx)
	}
}
