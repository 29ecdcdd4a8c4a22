//go:build waitingroombench

// The waiting room's benchmark (make bench-waitingroom; docs/benchmarks.md,
// "The waiting room"): N shoppers join a sale's queue on a fresh
// redis-server — once all after the start (a ticket each), once all before
// it (a shuffled slot each too) — and it reports Redis's used_memory per
// waiting shopper (INFO memory before and after), and the Redis main
// thread's CPU per poll (INFO cpu's used_cpu_*_main_thread over a run of
// polls of random shoppers: pipelined in batches, and one call at a time
// from 32 goroutines). WAITINGROOM_N sets N (default 200,000). Behind a
// build tag: it takes a minute or more, and make test must stay short.
package waitingroom_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

func info(t *testing.T, rdb *redis.Client, section, field string) float64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}

func mainCPU(t *testing.T, rdb *redis.Client) float64 {
	return info(t, rdb, "cpu", "used_cpu_user_main_thread") + info(t, rdb, "cpu", "used_cpu_sys_main_thread")
}

func TestBench_waitingRoom_memoryPerShopper_cpuPerPoll(t *testing.T) {
	n := 200_000
	if v := os.Getenv("WAITINGROOM_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	signer, _ := waitingroom.NewSigner(secret)
	svc := waitingroom.New(rdb, signer)
	keeper := stock.New(rdb, stock.Config{})
	t.Logf("redis-server %s, N = %d", info0(t, rdb), n)
	for _, c := range []struct {
		name   string
		id     int64
		starts time.Time
	}{{"after the start (a ticket each)", 1, time.Now().Add(-time.Second)}, {"before the start (shuffled)", 2, time.Now().Add(time.Hour)}} {
		a := roomSale(c.id, 1_000_000, 1, c.starts) // 1 a second: all but a few wait
		a.EndsAt = time.Now().Add(2 * time.Hour)
		if _, err := keeper.Load(ctx, a); err != nil {
			t.Fatal(err)
		}
		before := info(t, rdb, "memory", "used_memory")
		start := time.Now()
		joinAll(t, svc, c.id, n)
		took := time.Since(start)
		after := info(t, rdb, "memory", "used_memory")
		t.Logf("%s: %d joins in %v (%.0f/s, 32 goroutines); used_memory +%.0f bytes: %.1f bytes per waiting shopper",
			c.name, n, took.Round(time.Millisecond), float64(n)/took.Seconds(), after-before, (after-before)/float64(n))
		k := rediskeys.For(c.id)
		enc, _ := rdb.ObjectEncoding(ctx, k.QueueUser(12345)).Result()
		t.Logf("  a user bucket's encoding: %s (%d fields)", enc, rdb.HLen(ctx, k.QueueUser(12345)).Val())
	}
	// Polls of the sale after the start: one call each, 32 goroutines;
	// first every poll through queue.lua (the "before"), then the fast path
	// (fastread.go: the "after"), side by side on the same Redis and crowd.
	const polls = 100_000
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, run := range []struct {
		name string
		fast bool
	}{{"before (queue.lua every poll)", false}, {"after (the fast path)", true}} {
		svc.SetFastRead(run.fast)
		rdb.ConfigResetStat(ctx)
		cpu0 := mainCPU(t, rdb)
		start := time.Now()
		next.Store(0)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(next.Add(1)), 7))
				for next.Add(1) <= polls+32 {
					// An admission that lapsed is an answer too: with a
					// million joined, the first admitted have run out their
					// ttl by the time the polls come.
					if _, err := svc.Read(ctx, 1, 1+r.Int64N(int64(n))); err != nil && !errors.Is(err, waitingroom.ErrAdmissionExpired) {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		took := time.Since(start)
		cpu := mainCPU(t, rdb) - cpu0
		calls, usec := commandStats(t, rdb)
		t.Logf("polls %s, one call each from 32 goroutines: %d in %v (%.0f/s); Redis main thread %.2f s CPU: %.2f µs per poll; the commands' own time (INFO commandstats, all but INFO/CONFIG): %.2f µs per poll; EVALSHA calls %d (%.2f µs each); commands %v",
			run.name, polls, took.Round(time.Millisecond), polls/took.Seconds(), cpu, cpu/polls*1e6, usec/polls, calls["evalsha"], evalshaUsec(t, rdb), calls)
	}
	svc.SetFastRead(true)
	admissionRate(t, svc, keeper)
	// The control: the least script call, EVALSHA of "return 1", the same
	// way: what any one-call poll costs this Redis on this machine.
	nop := redis.NewScript("return 1")
	rdb.ConfigResetStat(ctx)
	cpu0 := mainCPU(t, rdb)
	start := time.Now()
	next.Store(0)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= polls+32 {
				if err := nop.Run(ctx, rdb, []string{"x"}).Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	cpu := mainCPU(t, rdb) - cpu0
	t.Logf("control, EVALSHA of \"return 1\" the same way: %d in %v (%.0f/s); Redis main thread %.2f s CPU: %.2f µs per call; the script itself: %.2f µs",
		polls, took.Round(time.Millisecond), polls/took.Seconds(), cpu, cpu/polls*1e6, evalshaUsec(t, rdb))
	_ = activity.Seckill
}

// commandStats is INFO commandstats' calls per command and the total usec
// of all but INFO and CONFIG (the bench's own).
func commandStats(t *testing.T, rdb *redis.Client) (map[string]int, float64) {
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls, total := map[string]int{}, 0.0
	for _, line := range strings.Split(s, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				calls[name], _ = strconv.Atoi(v)
			}
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
	}
	return calls, total
}

// evalshaUsec is INFO commandstats' usec_per_call of EVALSHA: the time the
// scripts ran, without the reading and writing of their calls.
func evalshaUsec(t *testing.T, rdb *redis.Client) float64 {
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
			for _, kv := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
					f, _ := strconv.ParseFloat(v, 64)
					return f
				}
			}
		}
	}
	return 0
}

func info0(t *testing.T, rdb *redis.Client) string {
	s, _ := rdb.Info(context.Background(), "server").Result()
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// joinAll joins users 1..n to sale from 32 goroutines.
func joinAll(t *testing.T, svc *waitingroom.Service, sale int64, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := next.Add(1); u <= int64(n); u = next.Add(1) {
				if _, err := svc.Join(context.Background(), sale, u, waitingroom.Proof{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// admissionRate: a sale admitting 200 a second with 20,000 waiting (more
// than a minute's worth, stock to spare: the business cap never bites);
// its counters read once a second (as a queue stream's watcher would, a
// tick) for WAITINGROOM_RATE_SECONDS (default 60): the shoppers admitted
// over the whole run within 5% of the rate (the bar), and each
// second's admissions, to show it is smooth rather than a burst a second.
func admissionRate(t *testing.T, svc *waitingroom.Service, keeper *stock.Keeper) {
	t.Helper()
	secs := 60
	if v := os.Getenv("WAITINGROOM_RATE_SECONDS"); v != "" {
		secs, _ = strconv.Atoi(v)
	}
	const rate, waiting, id = 200, 20_000, 3
	ctx := context.Background()
	a := roomSale(id, 1_000_000, rate, time.Now().Add(-time.Second))
	a.EndsAt = time.Now().Add(2 * time.Hour)
	if _, err := keeper.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	joinAll(t, svc, id, waiting)
	first, err := svc.Counters(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	start, last := time.Now(), first.Serving
	var per []int64
	for range secs {
		time.Sleep(time.Until(start.Add(time.Duration(len(per)+1) * time.Second)))
		c, err := svc.Counters(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		per = append(per, c.Serving-last)
		last = c.Serving
	}
	took := time.Since(start)
	got := float64(last-first.Serving) / took.Seconds()
	lo, hi := per[0], per[0]
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
	}
	t.Logf("admission at %d/s with %d waiting, read every second for %v: %d admitted, %.1f/s (%.2f%% off the rate); each second admitted %d to %d",
		rate, waiting, took.Round(time.Millisecond), last-first.Serving, got, 100*(got-rate)/rate, lo, hi)
	if got < 0.95*rate || got > 1.05*rate {
		t.Errorf("admitted %.1f a second over %v, want within 5%% of %d", got, took, rate)
	}
}
