package lock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// tallyFinish is written for a batch: it appends the size of each run to
// KEYS[1] ("runs"), adds every call's ARGV[1] to KEYS[2] ("sum") with one
// INCRBY, and answers each call with the running sum after it.
var tallyFinish = lock.NewBatchFinish(`
local runs, total = KEYS[calls.k[1] + 1], KEYS[calls.k[1] + 2]
redis.call('RPUSH', runs, calls.n)
local sum = tonumber(redis.call('GET', total) or '0')
local out = {}
for i = 1, calls.n do
  if calls.nk[i] ~= 2 or calls.na[i] ~= 1 then
    return redis.error_reply('the finish saw the lock\'s keys or arguments')
  end
  sum = sum + tonumber(ARGV[calls.a[i] + 1])
  out[i] = sum
end
redis.call('SET', total, sum)
return out
`)

// Concurrent releases with a batch finish run as one script: the finish
// sees every hold that is still held, once, and a hold lost meanwhile gets
// ErrNotHeld without its finish running, in the same run as the others.
func TestReleaseWith_batchFinish_concurrentHolds_oneRun_lostOneLeftOut(t *testing.T) {
	srv, rdb, c := setup(t)
	ctx := context.Background()
	const n = 12
	held := make([]*lock.Lock, n)
	for i := range held {
		held[i] = mustObtain(t, c, "k"+strconv.Itoa(i), 10*time.Second)
	}
	// Hold 5 is taken over behind its holder's back.
	rdb.Set(ctx, "fs:lock:{k5}", "someone else", 10*time.Second)
	b := redispipe.New(rdb)
	defer b.Close()

	srv.Pause()
	type answer struct {
		reply any
		err   error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	release := func(i int) {
		defer wg.Done()
		r, err := held[i].ReleaseWith(ctx, b, tallyFinish, []string{"runs", "sum"}, 1)
		answers[i] = answer{r, err}
	}
	wg.Add(1)
	go release(0) // goes out alone and hangs on the paused server
	time.Sleep(50 * time.Millisecond)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go release(i)
	}
	time.Sleep(200 * time.Millisecond) // the rest gather behind it
	srv.Resume()
	wg.Wait()

	if runs := rdb.LRange(ctx, "runs", 0, -1).Val(); strings.Join(runs, ",") != fmt.Sprintf("1,%d", n-2) {
		t.Fatalf("runs of the finish: %v, want [1 %d]: the first alone, the other held ones together", runs, n-2)
	}
	if !errors.Is(answers[5].err, lock.ErrNotHeld) {
		t.Fatalf("the hold taken over: %v, want ErrNotHeld", answers[5].err)
	}
	sums := map[int64]bool{}
	for i, a := range answers {
		if i == 5 {
			continue
		}
		if a.err != nil {
			t.Fatalf("release %d: %v", i, a.err)
		}
		sums[a.reply.(int64)] = true
		if _, err := c.Holder(ctx, "k"+strconv.Itoa(i)); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("k%d after its ReleaseWith: %v, want released", i, err)
		}
	}
	if len(sums) != n-1 || !sums[n-1] {
		t.Fatalf("running sums %v: want 1..%d, one per held release", sums, n-1)
	}
	if v := rdb.Get(ctx, "fs:lock:{k5}").Val(); v != "someone else" {
		t.Fatalf("the other owner's lock: %q, want untouched", v)
	}
}

// The obtains of one pipeline are one script too: many holders, one EVALSHA.
func TestObtain_concurrentObtains_mergeIntoOneScript(t *testing.T) {
	srv, rdb, c := setup(t)
	ctx := context.Background()
	const n = 30
	warm, err := c.ObtainGuarded(ctx, "warm", time.Second, countingGuard, []string{"warm-runs"}, []any{1000})
	if err != nil { // (it loads the script)
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before := evalshas(t, rdb)
	srv.Pause()
	var wg sync.WaitGroup
	got := make([]*lock.Lock, n)
	errs := make([]error, n)
	obtain := func(i int) {
		defer wg.Done()
		got[i], errs[i] = c.ObtainGuarded(ctx, "m"+strconv.Itoa(i), 5*time.Second, countingGuard, []string{"runs"}, []any{1000})
	}
	wg.Add(1)
	go obtain(0)
	time.Sleep(20 * time.Millisecond)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go obtain(i)
	}
	time.Sleep(80 * time.Millisecond)
	srv.Resume()
	wg.Wait()
	if ran := evalshas(t, rdb) - before; ran != 2 {
		t.Errorf("%d EVALSHA for %d obtains, want 2: the first alone, the rest merged", ran, n)
	}
	for i, l := range got {
		if errs[i] != nil {
			t.Fatalf("obtain %d: %v", i, errs[i])
		}
		if _, err := c.Holder(ctx, "m"+strconv.Itoa(i)); err != nil {
			t.Fatalf("holder of m%d: %v; want held", i, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if runs, _ := rdb.Get(ctx, "runs").Int(); runs != n {
		t.Fatalf("the guard ran %d times, want %d (once per obtain)", runs, n)
	}
}

// evalshas counts EVALSHA commands the server ran.
func evalshas(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info := rdb.Info(context.Background(), "commandstats").Val()
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}
