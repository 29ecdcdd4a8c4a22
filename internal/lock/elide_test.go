package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The two forms of a mutex a Deferred elides: keys of its own, a table's field.
var elideForms = []struct {
	name string
	opts []lock.Option
	// keys are what a hold of the lock writes to Redis (an elided step
	// writes none of them).
	keys []string
}{
	{"own keys", nil, []string{"fs:lock:{k}", "fs:lock:{k}:fence", "fs:lock:{k}:waiting"}},
	{"in a table", []lock.Option{lock.InTable("t"), lock.WithoutFence()}, []string{"fs:ltab:{t}", "fs:ltab:{t}:fence"}},
}

// A free lock is not taken: the guard and the finish run in one script,
// and nothing of the lock is written.
func TestDeferred_freeLock_runsGuardAndFinishInOneScript_writesNothingForTheLock(t *testing.T) {
	for _, form := range elideForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			run := lock.Direct(rdb)
			for i := range 2 { // the first loads the script (NOSCRIPT, then EVAL)
				d, err := c.DeferGuarded("k", time.Second, countingGuard, []string{"runs"}, []any{100}, form.opts...)
				if err != nil {
					t.Fatal(err)
				}
				before := testenv.ScriptCalls(t, rdb)
				reply, err := d.RunWith(ctx, run, writingFinish, []string{"out"}, "v"+strconv.Itoa(i))
				if err != nil || reply != "v"+strconv.Itoa(i) {
					t.Fatalf("RunWith: %v, %v", reply, err)
				}
				if i == 1 {
					if n := testenv.ScriptCalls(t, rdb) - before; n != 1 {
						t.Errorf("scripts run for one step: %d, want 1", n)
					}
				}
			}
			if v := rdb.Get(ctx, "out").Val(); v != "v1" {
				t.Errorf("out = %q, want v1", v)
			}
			if n, _ := rdb.Get(ctx, "runs").Int(); n != 2 {
				t.Errorf("the guard ran %d times, want 2", n)
			}
			if n := rdb.Exists(ctx, form.keys...).Val(); n != 0 {
				t.Errorf("%d of the lock's keys %v exist, want none", n, form.keys)
			}
		})
	}
}

// A held lock is waited for: the step runs once the holder released, as
// the next holder, and the lock is released after it.
func TestDeferred_heldLock_waitsForTheHolder_thenRunsHoldingIt(t *testing.T) {
	for _, form := range elideForms {
		for _, where := range []string{"another client", "this client"} {
			t.Run(form.name+"/"+where, func(t *testing.T) {
				_, rdb, c := setup(t)
				ctx := context.Background()
				holder := c
				if where == "another client" {
					holder = newClient(t, rdb, lock.Config{RecheckInterval: 50 * time.Millisecond})
				}
				held, err := holder.Obtain(ctx, "k", 5*time.Second, form.opts...)
				if err != nil {
					t.Fatal(err)
				}
				d, err := c.DeferGuarded("k", time.Second, countingGuard, []string{"runs"}, []any{100}, form.opts...)
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() {
					reply, err := d.RunWith(ctx, lock.Direct(rdb), writingFinish, []string{"out"}, "after")
					if err == nil && reply != "after" {
						err = fmt.Errorf("reply %v", reply)
					}
					done <- err
				}()
				select {
				case err := <-done:
					t.Fatalf("the step ended while the lock was held: %v", err)
				case <-time.After(300 * time.Millisecond):
				}
				if rdb.Exists(ctx, "out").Val() != 0 {
					t.Fatal("the finish ran while another held the lock")
				}
				if err := held.Release(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the step did not run after the release")
				}
				if n, _ := rdb.Get(ctx, "runs").Int(); n != 1 {
					t.Errorf("the guard ran %d times, want 1", n)
				}
				if l, err := c.TryObtain(ctx, "k", time.Second, form.opts...); err != nil {
					t.Errorf("after the step the lock is not free: %v", err)
				} else {
					_ = l.Release(ctx)
				}
			})
		}
	}
}

// A guard's refusal stops the step: no finish, nothing taken; a finish's
// error reply is the step's error; a Deferred runs once.
func TestDeferred_refusalsAndErrors(t *testing.T) {
	for _, form := range elideForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			run := lock.Direct(rdb)
			d, err := c.DeferGuarded("k", time.Second, countingGuard, []string{"runs"}, []any{0}, form.opts...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.RunWith(ctx, run, writingFinish, []string{"out"}, "x")
			var refused *lock.Refused
			if !errors.As(err, &refused) {
				t.Fatalf("over the guard: %v, want *lock.Refused", err)
			}
			if rdb.Exists(ctx, append([]string{"out"}, form.keys...)...).Val() != 0 {
				t.Fatal("a refused step wrote its finish or the lock")
			}
			if _, err := d.RunWith(ctx, run, writingFinish, []string{"out"}, "x"); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("a second RunWith: %v, want ErrNotHeld", err)
			}

			d, _ = c.Defer("k", time.Second, form.opts...)
			if _, err := d.RunWith(ctx, run, writingFinish, []string{"out"}, "boom"); err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("a finish's error reply: %v, want boom", err)
			}
			d, _ = c.Defer("k", time.Second, form.opts...)
			if err := d.Release(ctx); err != nil || d.Fence() != 0 {
				t.Fatalf("Release of an unused Deferred: %v, fence %d", err, d.Fence())
			}
			if _, err := d.RunWith(ctx, run, writingFinish, []string{"out"}, "x"); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("RunWith after Release: %v, want ErrNotHeld", err)
			}
			if _, err := c.Defer("", time.Second, form.opts...); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("an empty key: %v, want ErrInvalid", err)
			}
			if n := rdb.Exists(ctx, form.keys...).Val(); n != 0 {
				t.Errorf("%d of the lock's keys exist, want none", n)
			}
		})
	}
}

// incrFinish adds 1 to KEYS[1], atomically, and returns the new value.
var incrFinish = lock.NewBatchFinish(`
local out = {}
for i = 1, calls.n do
  out[i] = redis.call('INCR', KEYS[calls.k[i] + 1])
end
return out
`)

// Elided steps and ordinary holders of one lock, in goroutines of this
// process (over two clients, the steps merged by a shared batcher) and in
// child processes, never overlap. The holders add 1 to a counter the slow
// way — GET, a pause, SET — while holding the lock; the steps add 1 with
// INCR. A step run while a holder holds the lock is lost when the holder
// writes back what it read: the counter then ends below the number of
// additions.
func TestDeferred_elidedStepsAndHolders_neverOverlap_goroutinesAndProcesses(t *testing.T) {
	for _, form := range elideForms {
		t.Run(form.name, func(t *testing.T) {
			if testenv.ChildRole() == "elider" {
				n, err := elideAndHold(testenv.ClientOptions(os.Getenv(envRedisAddr)), form.opts, 4, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				rdb := redis.NewClient(testenv.ClientOptions(os.Getenv(envRedisAddr)))
				defer rdb.Close()
				rdb.IncrBy(context.Background(), "added", n)
				t.SkipNow()
			}
			srv := testenv.StartRedis(t)
			rdb := srv.Client(t)
			var procs []*testenv.Child
			for range 2 {
				procs = append(procs, testenv.StartChild(t, t.Name(), "elider", envRedisAddr+"="+srv.Addr()))
			}
			n, err := elideAndHold(testenv.ClientOptions(srv.Addr()), form.opts, 8, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for i, ch := range procs {
				if err := ch.Wait(); err != nil {
					t.Fatalf("child %d: %v\n%s", i, err, ch.Output())
				}
			}
			ctx := context.Background()
			children, _ := rdb.Get(ctx, "added").Int64()
			total := n + children
			got, _ := rdb.Get(ctx, "counter").Int64()
			if got != total {
				t.Fatalf("counter %d after %d additions: an elided step overlapped a hold", got, total)
			}
			if steps, _ := rdb.Get(ctx, "steps").Int64(); steps == 0 || steps == total {
				t.Fatalf("%d of %d additions by steps: want holders and steps to have run", steps, total)
			}
			t.Logf("%d additions, %s of them by deferred steps", total, rdb.Get(ctx, "steps").Val())
		})
	}
}

// elideAndHold runs workers goroutines for d: half hold "k" and add the
// slow way, over two lock clients, half add with a deferred step, over two
// other clients (a client's own holders would send its steps the long way,
// behind them at its gate), each with a batcher its steps share. It returns the additions made; the steps'
// are also counted in the key "steps".
func elideAndHold(opt *redis.Options, opts []lock.Option, workers int, d time.Duration) (int64, error) {
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var clients []*lock.Client
	var batchers []*redispipe.Pipe
	for range 4 {
		c := lock.NewClient(rdb, lock.Config{RecheckInterval: 20 * time.Millisecond})
		defer c.Close()
		b := redispipe.New(rdb)
		defer b.Close()
		clients, batchers = append(clients, c), append(batchers, b)
	}
	until := time.Now().Add(d)
	var added, steps atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c, b := clients[w%4], batchers[w%4]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				if w%4 < 2 {
					l, err := c.Obtain(ctx, "k", 2*time.Second, opts...)
					if err != nil {
						errs <- err
						return
					}
					v, _ := rdb.Get(ctx, "counter").Int64()
					time.Sleep(500 * time.Microsecond)
					rdb.Set(ctx, "counter", v+1, 0)
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
					added.Add(1)
					continue
				}
				dl, err := c.Defer("k", 2*time.Second, opts...)
				if err == nil {
					_, err = dl.RunWith(ctx, b, incrFinish, []string{"counter"})
				}
				if err != nil {
					errs <- err
					return
				}
				added.Add(1)
				steps.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return added.Load(), err
	}
	rdb.IncrBy(context.Background(), "steps", steps.Load())
	return added.Load(), nil
}

// slowFinish takes ARGV[1] ms of Redis time, then answers "done".
var slowFinish = lock.NewFinish(`
local function ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local until_ms = ms() + tonumber(ARGV[1])
while ms() < until_ms do end
return 'done'
`)

// WithMaxWait bounds the wait for a held lock — RunWith's and Obtain's —
// and nothing else: a step slower than the bound still runs to its end,
// elided or after a wait.
func TestDeferred_maxWait_boundsTheWaitOnly(t *testing.T) {
	for _, form := range elideForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			run := lock.Direct(rdb)
			opts := append([]lock.Option{lock.WithMaxWait(100 * time.Millisecond)}, form.opts...)

			d, _ := c.Defer("k", time.Second, opts...)
			if reply, err := d.RunWith(ctx, run, slowFinish, nil, 300); err != nil || reply != "done" {
				t.Fatalf("a 300 ms step under a free lock, max wait 100 ms: %v, %v", reply, err)
			}

			other := newClient(t, rdb, lock.Config{})
			held, err := other.Obtain(ctx, "k", 5*time.Second, form.opts...)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			d, _ = c.Defer("k", time.Second, opts...)
			_, err = d.RunWith(ctx, run, slowFinish, nil, 0)
			var waited *lock.WaitError
			if !errors.As(err, &waited) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lock.ErrCanceled) {
				t.Fatalf("RunWith on a held lock, max wait 100 ms: %v, want a WaitError of a deadline", err)
			}
			if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
				t.Fatalf("gave up after %v, want about 100 ms", el)
			}
			if _, err := c.Obtain(ctx, "k", time.Second, opts...); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Obtain on a held lock, max wait 100 ms: %v, want a deadline", err)
			}

			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = held.Release(ctx)
			}()
			d, _ = c.Defer("k", time.Second, append([]lock.Option{lock.WithMaxWait(200 * time.Millisecond)}, form.opts...)...)
			if reply, err := d.RunWith(ctx, run, slowFinish, nil, 300); err != nil || reply != "done" {
				t.Fatalf("a 300 ms step after a wait: %v, %v", reply, err)
			}
		})
	}
}
