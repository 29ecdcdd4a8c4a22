package redispipe

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

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

// incrEach: INCR KEYS[1] by ARGV[1]; 'boom' raises an error, 'nil' answers nil.
var incrEach = luascript.NewMerged(luascript.Each(`
if ARGV[1] == 'boom' then
  return redis.call('INCRBY', KEYS[1], 'not a number')
end
if ARGV[1] == 'nil' then
  return nil
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
`))

// evalshaCalls is how many EVALSHA commands the server ran so far.
func evalshaCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	stats, err := testenv.CommandStats(context.Background(), rdb)
	if err != nil {
		t.Fatal(err)
	}
	return int(stats["evalsha"].Calls)
}

// pileUp starts n calls of run while srv is paused, so that all but the
// first (which goes out at once and hangs on the paused server) wait in the
// pipe for one pipeline; it returns once they do, and the calls' errors
// come on the returned channel after srv resumes.
func pileUp(t *testing.T, srv *testenv.RedisServer, b *Pipe, n int, run func(i int) error) <-chan error {
	t.Helper()
	errs := make(chan error, n)
	srv.Pause()
	go func() { errs <- run(0) }()
	time.Sleep(20 * time.Millisecond)
	for i := 1; i < n; i++ {
		go func() { errs <- run(i) }()
	}
	defer srv.Resume()
	waitPending(t, b, n-1)
	return errs
}

// waitPending waits until exactly n calls wait for b's loop.
func waitPending(t *testing.T, b *Pipe, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); b.loop.Pending() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls pending, want %d", b.loop.Pending(), n)
		}
	}
}

// waitSending waits until b's loop has begun a batch after the begun-th:
// the call it took is in flight, and the loop waits on it.
func waitSending(t *testing.T, b *Pipe, begun int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); b.sending.Load() == begun; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the batching loop began no batch after %d", begun)
		}
	}
}

func TestMerged_callsOfOnePipeline_runAsOneScript_eachGetsItsOwnAnswer(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	if err := incrEach.Load(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	before := evalshaCalls(t, rdb)
	const n = 40
	errs := pileUp(t, srv, b, n, func(i int) error {
		key := fmt.Sprintf("k%d", i)
		got, err := b.RunMerged(ctx, incrEach, "", []string{key}, i+1).Int64()
		if err != nil {
			return err
		}
		if got != int64(i+1) {
			return fmt.Errorf("call %d got %d: answers were mixed up", i, got)
		}
		return nil
	})
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The first call alone, then the 39 that piled up behind it as one.
	if got := evalshaCalls(t, rdb) - before; got != 2 {
		t.Fatalf("%d EVALSHA for %d calls, want 2 (the first alone, the rest merged)", got, n)
	}
}

func TestMerged_anErrorOrNilAnswersOnlyItsCall(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	args := []string{"1", "boom", "2", "nil", "3"}
	answers := make([]*redis.Cmd, len(args))
	var mu sync.Mutex
	errs := pileUp(t, srv, b, len(args), func(i int) error {
		cmd := b.RunMerged(ctx, incrEach, "", []string{"k"}, args[i])
		mu.Lock()
		answers[i] = cmd
		mu.Unlock()
		return nil
	})
	for range args {
		<-errs
	}
	if err := answers[1].Err(); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("the failing call's answer: %v, want its own script error", err)
	}
	if err := answers[3].Err(); err != redis.Nil {
		t.Fatalf("the nil call's answer: %v, want redis.Nil", err)
	}
	sum := int64(0)
	for _, i := range []int{0, 2, 4} {
		n, err := answers[i].Int64()
		if err != nil {
			t.Fatalf("call %d: %v (another call's error leaked into it)", i, err)
		}
		sum = max(sum, n)
	}
	if v, _ := rdb.Get(ctx, "k").Int64(); v != 6 || sum != 6 {
		t.Fatalf("k = %d, highest answer %d; want 6 and 6: every good call ran once", v, sum)
	}
}

// A body written for a batch reads what its calls share once; the calls
// run in the order they were made, atomically together.
func TestMerged_batchBody_seesTheWholeBatch(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	sum := luascript.NewMerged(`
local key = KEYS[calls.k[1] + 1]
local total = tonumber(redis.call('GET', key) or '0')
local out = {}
for i = 1, calls.n do
  total = total + tonumber(ARGV[calls.a[i] + 1])
  out[i] = {total, calls.n}
end
redis.call('SET', key, total)
return out
`)
	const n = 10
	seen := make([][]any, n)
	var mu sync.Mutex
	errs := pileUp(t, srv, b, n, func(i int) error {
		r, err := b.RunMerged(ctx, sum, "g", []string{"total"}, 1).Slice()
		mu.Lock()
		seen[i] = r
		mu.Unlock()
		return err
	})
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	totals := map[int64]bool{}
	for i, r := range seen {
		totals[r[0].(int64)] = true
		if size := r[1].(int64); i > 0 && size != n-1 {
			t.Fatalf("call %d ran in a batch of %d, want %d", i, size, n-1)
		}
	}
	if len(totals) != n {
		t.Fatalf("running totals %v: want %d distinct (one per call)", totals, n)
	}
	if v, _ := rdb.Get(ctx, "total").Int64(); v != n {
		t.Fatalf("total = %d, want %d", v, n)
	}
}

// Different groups are different runs: a group is what may share keys.
func TestMerged_groupsAreRunApart(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	size := luascript.NewMerged(`
local out = {}
for i = 1, calls.n do out[i] = calls.n end
return out
`)
	const n = 9
	sizes := make([]int64, n)
	errs := pileUp(t, srv, b, n, func(i int) error {
		var err error
		sizes[i], err = b.RunMerged(ctx, size, strconv.Itoa(i%2), nil).Int64()
		return err
	})
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Calls 1..8 piled up: 4 in group "1" (1,3,5,7), 4 in group "0" (2,4,6,8).
	for i := 1; i < n; i++ {
		if sizes[i] != 4 {
			t.Fatalf("call %d ran with %d calls, want 4 (its group only)", i, sizes[i])
		}
	}
}

func TestMerged_runAlone_andAfterScriptFlush(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if n, err := incrEach.Run(ctx, rdb, []string{"k"}, 5).Int64(); err != nil || n != 5 {
		t.Fatalf("Run: %d, %v; want 5", n, err)
	}
	if err := incrEach.Run(ctx, rdb, []string{"k"}, "nil").Err(); err != redis.Nil {
		t.Fatalf("Run of a nil answer: %v, want redis.Nil", err)
	}
	b := New(rdb)
	defer b.Close()
	rdb.ScriptFlush(ctx)
	if n, err := b.RunMerged(ctx, incrEach, "", []string{"k"}, 1).Int64(); err != nil || n != 6 {
		t.Fatalf("after SCRIPT FLUSH: %d, %v; want 6 (reloaded and run once)", n, err)
	}
	b.Close()
	if n, err := b.RunMerged(ctx, incrEach, "", []string{"k"}, 1).Int64(); err != nil || n != 7 {
		t.Fatalf("after Close (straight to Redis): %d, %v; want 7", n, err)
	}
	var rerr redis.Error
	if err := incrEach.Run(ctx, rdb, []string{"k"}, "boom").Err(); !errors.As(err, &rerr) {
		t.Fatalf("Run of a failing call: %v, want its Redis error", err)
	}
}
