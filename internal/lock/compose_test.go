package lock_test

import (
	"context"
	"errors"
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

// The two forms of a mutex a step runs under: keys of its own, a table's field.
var stepForms = []struct {
	name string
	opts []lock.Option
	// keys are what a hold of the lock writes to Redis (an elided step
	// writes none of them).
	keys []string
}{
	{"own keys", nil, []string{"fs:lock:{k}", "fs:lock:{k}:fence", "fs:lock:{k}:waiting"}},
	{"in a table", []lock.Option{lock.InTable("t"), lock.WithoutFence()}, []string{"fs:ltab:{t}", "fs:ltab:{t}:fence"}},
}

// libLock is lib_lock.lua with its libraries: a caller's script starts
// with it, as a "uses: lib_lock" line would give.
func libLock(t testing.TB) string {
	t.Helper()
	src, err := lock.Lua.Source("lib_lock")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// stepScript is a caller's step under a lock: KEYS[1..2] and ARGV[1..3]
// are the lock's Ref, KEYS[3] the step's counter. With ARGV[4] "elide" it
// runs when nobody holds the lock ({0, ms left} and nothing done when
// someone does); with "release" when the Ref's value holds it, releasing
// it ({0} and nothing done when not). The step adds 1 to KEYS[3]; ARGV[5]
// "boom" makes it answer an error reply instead. It returns {1, the new
// count, the release's code}.
func stepScript(t testing.TB) *redis.Script {
	return redis.NewScript(libLock(t) + `
local ref, now = lock_ref(0, 0), table_now()
local code = 0
if ARGV[4] == 'elide' then
  local h = lock_holders({ref}, now)[1]
  if h then
    return {0, h[1]}
  end
else
  code = lock_release({ref}, now)[1]
  if code == 0 then
    return {0}
  end
end
if ARGV[5] == 'boom' then
  return redis.error_reply('boom')
end
return {1, redis.call('INCR', KEYS[3]), code}
`)
}

// runStep runs step for ref in mode ("elide", "release").
func runStep(ctx context.Context, rdb redis.Scripter, step *redis.Script, ref lock.Ref, mode string, extra ...any) ([]any, error) {
	args := []any{ref.Args[0], ref.Args[1], ref.Args[2], mode}
	return step.Run(ctx, rdb, []string{ref.Keys[0], ref.Keys[1], "counter"}, append(args, extra...)...).Slice()
}

// releaseWithStep is ReleaseIn running the step: its count when it ran.
func releaseWithStep(ctx context.Context, rdb redis.Scripter, step *redis.Script, l *lock.Lock, extra ...any) (int64, error) {
	var count int64
	err := l.ReleaseIn(ctx, func(ref lock.Ref) (int64, error) {
		res, err := runStep(ctx, rdb, step, ref, "release", extra...)
		if err != nil {
			return 0, err
		}
		if res[0] == int64(0) {
			return 0, nil
		}
		count = res[1].(int64)
		return res[2].(int64), nil
	})
	return count, err
}

// A free lock is not taken: the step's script finds it free, runs the
// step, and nothing of the lock is written.
func TestElide_freeLock_stepRunsInItsOneScript_nothingWrittenForTheLock(t *testing.T) {
	for _, form := range stepForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			step := stepScript(t)
			for want := int64(1); want <= 2; want++ {
				e, ok := c.Elide("k", form.opts...)
				if !ok {
					t.Fatal("Elide said no for a free lock")
				}
				res, err := runStep(ctx, rdb, step, e.Ref, "elide")
				if err != nil || res[0] != int64(1) || res[1] != want {
					t.Fatalf("step %d: %v, %v", want, res, err)
				}
				e.Checked(true)
			}
			if n := rdb.Exists(ctx, form.keys...).Val(); n != 0 {
				t.Errorf("%d of the lock's keys %v exist, want none", n, form.keys)
			}
		})
	}
}

// A held lock stops the elided step: its script finds the holder, runs
// nothing, and says how long the holder has left; the step then takes its
// turn (Obtain, after the holder) and runs with the release (ReleaseIn).
func TestElide_heldLock_stepRunsNothing_thenRunsWithTheRelease(t *testing.T) {
	for _, form := range stepForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			step := stepScript(t)
			other := newClient(t, rdb, lock.Config{RecheckInterval: 50 * time.Millisecond})
			held := mustObtain(t, other, "k", 5*time.Second, form.opts...)
			e, ok := c.Elide("k", form.opts...)
			if !ok {
				t.Fatal("Elide said no: another client's hold is for the script to find")
			}
			res, err := runStep(ctx, rdb, step, e.Ref, "elide")
			if err != nil || res[0] != int64(0) {
				t.Fatalf("elided step under a held lock: %v, %v; want {0, ms left}", res, err)
			}
			if left := res[1].(int64); left < 4000 || left > 5000 {
				t.Errorf("holder's time left %d ms, want about 5000", left)
			}
			if rdb.Exists(ctx, "counter").Val() != 0 {
				t.Fatal("the step ran while another held the lock")
			}
			done := make(chan error, 1)
			go func() {
				l, err := c.Obtain(ctx, "k", time.Second, form.opts...)
				if err == nil {
					_, err = releaseWithStep(ctx, rdb, step, l)
				}
				done <- err
			}()
			time.Sleep(200 * time.Millisecond)
			if rdb.Exists(ctx, "counter").Val() != 0 {
				t.Fatal("the step ran before the holder released")
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
			if n, _ := rdb.Get(ctx, "counter").Int(); n != 1 {
				t.Fatalf("counter %d, want 1", n)
			}
			if _, err := c.TryObtain(ctx, "k", time.Second, form.opts...); err != nil {
				t.Fatalf("the lock after the step's release: %v, want free", err)
			}
		})
	}
}

// Elide says no where the step must queue or cannot share the lock's
// script: a holder or waiter in this process goes first, and bad names
// are Obtain's to refuse.
func TestElide_localHolderOrBadKey_saysNo(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l, err := c.Obtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Elide("k"); ok {
		t.Fatal("Elide said yes while this client holds the lock")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Elide("k"); !ok {
		t.Fatal("Elide said no once the lock was released")
	}
	for _, bad := range []string{"", "a{b}"} {
		if _, ok := c.Elide(bad); ok {
			t.Fatalf("Elide(%q) said yes", bad)
		}
	}
	if _, ok := c.Elide("a|b", lock.InTable("t")); ok {
		t.Fatal("Elide said yes to a name a table cannot hold")
	}
}

// ReleaseIn runs the caller's step and releases in one script, only while
// the lock is held: a waiter elsewhere is woken (code 2); a lock lost to
// its ttl and taken by another is ErrNotHeld with nothing run; the step's
// own error reply is the caller's to read, the lock released all the same;
// a second call and the other kinds are refused.
func TestReleaseIn_stepRunsOnlyWhileHeld_andReleases(t *testing.T) {
	for _, form := range stepForms {
		t.Run(form.name, func(t *testing.T) {
			_, rdb, c := setup(t)
			ctx := context.Background()
			step := stepScript(t)

			l := mustObtain(t, c, "k", 5*time.Second, form.opts...)
			other := newClient(t, rdb, lock.Config{RecheckInterval: time.Minute})
			woken := make(chan *lock.Lock, 1)
			start := time.Now()
			go func() {
				w, _ := other.Obtain(ctx, "k", time.Second, form.opts...)
				woken <- w
			}()
			time.Sleep(200 * time.Millisecond) // the waiter marks the lock
			if n, err := releaseWithStep(ctx, rdb, step, l); err != nil || n != 1 {
				t.Fatalf("ReleaseIn of a held lock: count %d, %v", n, err)
			}
			w := <-woken
			if w == nil || time.Since(start) > 5*time.Second {
				t.Fatal("the waiter elsewhere was not woken by the step's release")
			}
			if err := l.ReleaseIn(ctx, func(lock.Ref) (int64, error) { return 1, nil }); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("a second ReleaseIn: %v, want ErrNotHeld", err)
			}
			_ = w.Release(ctx)

			short := mustObtain(t, c, "k", 50*time.Millisecond, append([]lock.Option{lock.WithoutRenewal()}, form.opts...)...)
			time.Sleep(100 * time.Millisecond)
			taker := mustObtain(t, other, "k", 5*time.Second, form.opts...)
			if _, err := releaseWithStep(ctx, rdb, step, short); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("ReleaseIn after the lock was lost: %v, want ErrNotHeld", err)
			}
			if n, _ := rdb.Get(ctx, "counter").Int(); n != 1 {
				t.Fatalf("counter %d: the step ran on a lost lock", n)
			}
			if _, err := other.Holder(ctx, "k"); form.opts == nil && err != nil {
				t.Fatalf("the taker's lock after the lost holder's ReleaseIn: %v", err)
			}
			_ = taker.Release(ctx)

			l = mustObtain(t, c, "k", 5*time.Second, form.opts...)
			var stepErr error
			err := l.ReleaseIn(ctx, func(ref lock.Ref) (int64, error) {
				_, stepErr = runStep(ctx, rdb, step, ref, "release", "boom")
				return 1, nil // the release ran before the step's answer
			})
			if err != nil || stepErr == nil || !strings.Contains(stepErr.Error(), "boom") {
				t.Fatalf("a step answering an error: ReleaseIn %v, step %v", err, stepErr)
			}
			if _, err := c.TryObtain(ctx, "k", time.Second, form.opts...); err != nil {
				t.Fatalf("the lock after a step's error reply: %v, want released", err)
			}
		})
	}
	_, rdb, c := setup(t)
	ctx := context.Background()
	r, err := c.Reentrant().Obtain(ctx, "r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseIn(ctx, func(lock.Ref) (int64, error) { return 1, nil }); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("ReleaseIn of a reentrant lock: %v, want ErrInvalid", err)
	}
	if n := rdb.Exists(ctx, "fs:rlock:{r}").Val(); n != 0 {
		t.Fatal("the reentrant lock was not released")
	}
}

// Elided steps and holders of the lock, in goroutines of this process
// (over four clients sharing a pipeline) and in child processes, never
// overlap. The holders add 1 to a counter the slow way — GET, a pause,
// SET — while holding the lock; the steps add 1 with INCR, elided when
// the lock is free, else after Obtain and with ReleaseIn. A step run while
// a holder holds the lock is lost when the holder writes back what it
// read: the counter then ends below the number of additions.
func TestElide_elidedStepsAndHolders_neverOverlap_goroutinesAndProcesses(t *testing.T) {
	for _, form := range stepForms {
		t.Run(form.name, func(t *testing.T) {
			if testenv.ChildRole() == "elider" {
				n, err := elideAndHold(t, testenv.ClientOptions(os.Getenv(envRedisAddr)), form.opts, 4, 2*time.Second)
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
			n, err := elideAndHold(t, testenv.ClientOptions(srv.Addr()), form.opts, 8, 2*time.Second)
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
			elided, _ := rdb.Get(ctx, "elided").Int64()
			if steps, _ := rdb.Get(ctx, "steps").Int64(); steps == 0 || steps == total || elided == 0 || elided == steps {
				t.Fatalf("%d of %d additions by steps, %d of them elided: want holders, elided steps and steps after a wait", steps, total, elided)
			}
			t.Logf("%d additions, %s of them by steps, %d elided", total, rdb.Get(ctx, "steps").Val(), elided)
		})
	}
}

// elideAndHold runs workers goroutines for d: half hold "k" and add the
// slow way, over two lock clients, half add with a step, over two other
// clients (a client's own holders would send its steps the long way,
// behind them at its gate), the four sharing a pipeline. It returns the
// additions made; the steps' are also counted in the key "steps", the
// elided ones in "elided".
func elideAndHold(t testing.TB, opt *redis.Options, opts []lock.Option, workers int, d time.Duration) (int64, error) {
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pipe := redispipe.New(rdb)
	defer pipe.Close()
	step := stepScript(t)
	var clients []*lock.Client
	for range 4 {
		c := lock.NewClient(rdb, lock.Config{RecheckInterval: 20 * time.Millisecond, Pipeline: pipe})
		defer c.Close()
		clients = append(clients, c)
	}
	until := time.Now().Add(d)
	var added, steps, elided atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := clients[w%4]
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
				if e, ok := c.Elide("k", opts...); ok {
					res, err := runStep(ctx, rdb, step, e.Ref, "elide")
					if err != nil {
						errs <- err
						return
					}
					e.Checked(res[0] == int64(1))
					if res[0] == int64(1) {
						added.Add(1)
						steps.Add(1)
						elided.Add(1)
						continue
					}
				}
				l, err := c.Obtain(ctx, "k", 2*time.Second, opts...)
				if err == nil {
					_, err = releaseWithStep(ctx, rdb, step, l)
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
	rdb.IncrBy(context.Background(), "elided", elided.Load())
	return added.Load(), nil
}

// Through a Pipeline, the obtains of table locks in one pipeline are one
// script, and so are their releases: many holders, one EVALSHA each way.
func TestTable_obtainsAndReleasesOfAPipeline_mergeIntoOneScriptEach(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	pipe := redispipe.New(rdb)
	defer pipe.Close()
	c := newClient(t, rdb, lock.Config{Pipeline: pipe})
	ctx := context.Background()
	in := lock.InTable("sale:9")
	warm := mustObtain(t, c, "warm", time.Second, in) // loads the scripts
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 30
	got := make([]*lock.Lock, n)
	errs := make([]error, n)
	together := func(do func(i int)) int64 {
		before := testenv.ScriptCalls(t, rdb)
		srv.Pause()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); do(i) }()
			if i == 0 {
				time.Sleep(20 * time.Millisecond) // the first goes alone, the rest pile up behind it
			}
		}
		time.Sleep(80 * time.Millisecond)
		srv.Resume()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		return testenv.ScriptCalls(t, rdb) - before
	}
	if ran := together(func(i int) { got[i], errs[i] = c.Obtain(ctx, strconv.Itoa(i), 5*time.Second, in) }); ran != 2 {
		t.Errorf("%d scripts for %d obtains, want 2: the first alone, the rest merged", ran, n)
	}
	for i := range n {
		if _, err := c.HolderIn(ctx, "sale:9", strconv.Itoa(i)); err != nil {
			t.Fatalf("holder of %d: %v; want held", i, err)
		}
	}
	if ran := together(func(i int) { errs[i] = got[i].Release(ctx) }); ran != 2 {
		t.Errorf("%d scripts for %d releases, want 2", ran, n)
	}
	if left := rdb.HLen(ctx, "fs:ltab:{sale:9}").Val(); left != 0 {
		t.Fatalf("%d fields left in the table after every release", left)
	}
}
