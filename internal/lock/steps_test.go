package lock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// countingGuard counts its runs in KEYS[1] and refuses past ARGV[1] runs.
var countingGuard = lock.NewGuard(`
local n = redis.call('INCR', KEYS[1])
if n > tonumber(ARGV[1]) then
  return {'over', n}
end
return nil
`)

// writingFinish writes ARGV[1] to KEYS[1] and returns it; ARGV[1] "boom"
// returns an error reply instead, "raise" raises a Lua error.
var writingFinish = lock.NewFinish(`
if ARGV[1] == 'boom' then
  return redis.error_reply('boom')
end
if ARGV[1] == 'raise' then
  error('raised')
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

func TestObtainGuarded_allowsOnce_refusesWithTheGuardsReply_takesNothing(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	for i := 1; i <= 2; i++ {
		l, err := c.ObtainGuarded(ctx, "k"+strconv.Itoa(i), time.Second, countingGuard, []string{"runs"}, []any{2})
		if err != nil {
			t.Fatalf("obtain %d: %v", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.ObtainGuarded(ctx, "k3", time.Second, countingGuard, []string{"runs"}, []any{2})
	var refused *lock.Refused
	if !errors.As(err, &refused) {
		t.Fatalf("third obtain: %v, want *lock.Refused", err)
	}
	if want := []any{"over", int64(3)}; !reflect.DeepEqual(refused.Reply, want) {
		t.Errorf("refusal %#v, want %#v", refused.Reply, want)
	}
	if _, err := c.Holder(ctx, "k3"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("k3 after the refusal: %v, want ErrNotHeld (nothing taken)", err)
	}
	if n, _ := rdb.Get(ctx, "runs").Int(); n != 3 {
		t.Errorf("the guard ran %d times, want 3", n)
	}
}

// A guarded obtain that has to wait runs its guard once, on its first
// attempt, however many attempts the wait takes.
func TestObtainGuarded_waiting_runsTheGuardOnce(t *testing.T) {
	_, rdb, _ := setup(t)
	other := newClient(t, rdb, lock.Config{RecheckInterval: 20 * time.Millisecond})
	ctx := context.Background()
	held, err := other.Obtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: 20 * time.Millisecond})
	got := make(chan error, 1)
	go func() {
		l, err := waiter.ObtainGuarded(ctx, "k", time.Second, countingGuard, []string{"runs"}, []any{100})
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // ~15 rechecks
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Get(ctx, "runs").Int(); n != 1 {
		t.Errorf("the guard ran %d times over the wait, want 1", n)
	}
}

func TestReleaseWith_runsTheFinishAndReleases_onlyWhileHeld(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()

	l := mustObtain(t, c, "k", time.Second)
	reply, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "done")
	if err != nil || reply != "done" {
		t.Fatalf("ReleaseWith: %v, %v; want done", reply, err)
	}
	if v, _ := rdb.Get(ctx, "out").Result(); v != "done" {
		t.Errorf("out = %q, want done", v)
	}
	if _, err := c.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("after ReleaseWith: %v, want ErrNotHeld", err)
	}
	if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "again"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("second ReleaseWith: %v, want ErrNotHeld", err)
	}

	// Deleted behind the holder's back: the finish must not run.
	l = mustObtain(t, c, "k", time.Second)
	rdb.Del(ctx, "fs:lock:{k}")
	if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"stolen"}, "ran"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("ReleaseWith of a deleted lock: %v, want ErrNotHeld", err)
	}
	if n := rdb.Exists(ctx, "stolen").Val(); n != 0 {
		t.Error("the finish ran although the lock was gone")
	}

	// Taken by someone else since: neither run nor deleted.
	l = mustObtain(t, c, "k", time.Second)
	rdb.Set(ctx, "fs:lock:{k}", "someone else", time.Minute)
	if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"stolen"}, "ran"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("ReleaseWith of a lock taken over: %v, want ErrNotHeld", err)
	}
	if v := rdb.Get(ctx, "fs:lock:{k}").Val(); v != "someone else" || rdb.Exists(ctx, "stolen").Val() != 0 {
		t.Errorf("the new holder's key is %q, stolen exists %d: touched", v, rdb.Exists(ctx, "stolen").Val())
	}
	rdb.Del(ctx, "fs:lock:{k}")

	// A finish that fails, with an error reply or a raised error: its
	// error, and the lock is released anyway.
	for _, how := range []string{"boom", "raise"} {
		l = mustObtain(t, c, "k", time.Second)
		if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, how); err == nil || !strings.Contains(err.Error(), strings.Replace(how, "raise", "raised", 1)) {
			t.Errorf("failing finish (%s): %v, want its error", how, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			if _, err := c.Holder(ctx, "k"); errors.Is(err, lock.ErrNotHeld) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the lock was not released after its finish failed (%s)", how)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Nil finish: invalid, and the lock is still released.
	l = mustObtain(t, c, "k", time.Second)
	if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), nil, nil); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("nil finish: %v, want ErrInvalid", err)
	}
	if _, err := c.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("after a nil finish: %v, want released", err)
	}
}

// Handing the lock to a waiter of the same process, the finish runs first:
// the next holder sees its write the moment it holds the lock. (A cohort
// hands over locally only when it reserved fences for it: when it obtained
// the lock with waiters already queued behind it. So: h0 holds, A and B
// queue; A obtains with B waiting, and hands over to B.)
func TestReleaseWith_localHandoff_finishRunsBeforeTheNextHolder(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	h0, err := c.Obtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	aHolds := make(chan *lock.Lock, 1)
	go func() {
		l, err := c.Obtain(ctx, "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		aHolds <- l
	}()
	time.Sleep(50 * time.Millisecond)
	seen := make(chan string, 1)
	go func() {
		l, err := c.Obtain(ctx, "k", time.Second)
		if err != nil {
			seen <- err.Error()
			return
		}
		seen <- rdb.Get(ctx, "out").Val()
		_ = l.Release(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	if err := h0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-aHolds
	if a == nil {
		t.FailNow()
	}
	if _, err := a.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "A's"); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != "A's" {
		t.Errorf("the next holder saw out = %q, want the finish's write", got)
	}
}

// Mutual exclusion holds when every holder enters through a guard and
// leaves through a finish: goroutines of two clients each do a
// read-modify-write of a counter under the lock (GET, then SET+1 in the
// finish); no increment is lost, and every guard ran once per obtain.
func TestSteps_contended_twoClients_noLostUpdate(t *testing.T) {
	_, rdb, _ := setup(t)
	clients := []*lock.Client{newClient(t, rdb, lock.Config{}), newClient(t, rdb, lock.Config{})}
	setTo := lock.NewFinish(`redis.call('SET', KEYS[1], ARGV[1]) return 1`)
	const perGoroutine, goroutines = 40, 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func(c *lock.Client) {
			defer wg.Done()
			for range perGoroutine {
				l, err := c.ObtainGuarded(ctx, "counter", 5*time.Second, countingGuard, []string{"runs"}, []any{1 << 30})
				if err != nil {
					errs <- err
					return
				}
				n, _ := rdb.Get(ctx, "n").Int()
				if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), setTo, []string{"n"}, n+1); err != nil {
					errs <- fmt.Errorf("ReleaseWith: %w", err)
					return
				}
			}
		}(clients[g%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := perGoroutine * goroutines
	if n, _ := rdb.Get(ctx, "n").Int(); n != want {
		t.Errorf("counter %d, want %d: an update was lost", n, want)
	}
	if n, _ := rdb.Get(ctx, "runs").Int(); n != want {
		t.Errorf("guards ran %d times, want %d (once per obtain)", n, want)
	}
}

// Under Redis Cluster the steps' keys live in other slots: they run by
// themselves, and everything still happens.
func TestSteps_cluster_runByThemselves(t *testing.T) {
	cluster := testenv.StartRedisCluster(t, 3)
	rdb := cluster.Client(t)
	c := newClient(t, rdb, lock.Config{})
	ctx := context.Background()
	l, err := c.ObtainGuarded(ctx, "k", time.Second, countingGuard, []string{"runs"}, []any{1})
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "done"); err != nil || reply != "done" {
		t.Fatalf("ReleaseWith: %v, %v", reply, err)
	}
	if v := rdb.Get(ctx, "out").Val(); v != "done" {
		t.Errorf("out = %q", v)
	}
	if _, err := c.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("after ReleaseWith: %v, want released", err)
	}
	var refused *lock.Refused
	if _, err := c.ObtainGuarded(ctx, "k", time.Second, countingGuard, []string{"runs"}, []any{1}); !errors.As(err, &refused) {
		t.Errorf("second obtain past the guard's limit: %v, want *lock.Refused", err)
	}
	if _, err := c.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("after a refusal: %v, want nothing taken", err)
	}
}

func TestReleaseWith_otherKinds_invalid_andReleased(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	l, err := c.Reentrant().Obtain(ctx, "r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReleaseWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "x"); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("reentrant ReleaseWith: %v, want ErrInvalid", err)
	}
	if rdb.Exists(ctx, "out").Val() != 0 {
		t.Error("the finish ran")
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.Reentrant().Obtain(wctx, "r", time.Second); err != nil {
		t.Errorf("the reentrant lock was not released: %v", err)
	}
}
