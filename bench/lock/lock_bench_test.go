// Package lock_test benchmarks flashsale's Redis locks side by side with the
// seed recipes (and, from the lock-kinds issue on, peer libraries) against one
// throwaway redis-server on this machine. Run with `make bench-lock`.
//
// Two scenarios:
//
//   - Uncontended: 32 goroutines, each on its own key, obtain+release in a
//     loop. ns/op is per obtain+release pair; ops/s is the aggregate;
//     redis-µs/op is Redis main-thread CPU per pair (INFO cpu).
//   - HotKey: 32 goroutines contend on one key, each obtaining and releasing
//     in a loop. An op is one handoff. Reported: handoffs/s; handoff latency
//     (from the holder starting Release to the next holder's Obtain
//     returning) p50/p99; the wait of one Obtain p50/p99 (mostly queueing
//     behind the other 31); client commands per obtain (every command a
//     client sent, counted by a go-redis hook, plus SUBSCRIBE/UNSUBSCRIBE from
//     INFO commandstats, which pub/sub connections do not pass through
//     hooks); Redis main-thread CPU per obtain (INFO cpu); and fairness as max/min
//     obtains per goroutine and fifo-%, the share of obtains that went to
//     the goroutine that had waited longest (within 1ms).
package lock_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

const (
	contenders = 32
	lockTTL    = 10 * time.Second
)

// locker is one lock implementation under test. obtain blocks until held.
type locker interface {
	obtain(ctx context.Context, key string) (release func(context.Context) error, err error)
}

// impl builds a locker; clients > 1 asks for that many independent instances
// (as separate processes would have), goroutines spread over them.
type impl struct {
	name    string
	clients int
	build   func(tb testing.TB, rdb *redis.Client) locker
}

// countHook counts commands a client sends (pipelined ones each).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

type env struct {
	srv  *testenv.RedisServer
	rdb  *redis.Client
	hook *countHook
}

func newEnv(b *testing.B) *env {
	srv := testenv.StartRedis(b)
	opt := testenv.ClientOptions(srv.Addr())
	opt.PoolSize = 4 * contenders
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { rdb.Close() })
	h := &countHook{}
	rdb.AddHook(h)
	return &env{srv: srv, rdb: rdb, hook: h}
}

// commandstats parses INFO commandstats: calls and usec per command.
func (e *env) commandstats(b *testing.B) map[string][2]int64 {
	info, err := e.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][2]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]int64{calls, usec}
	}
	return out
}

// usage is what Redis has done so far: commands clients sent (the hook, plus
// SUBSCRIBE/UNSUBSCRIBE, which pub/sub connections send past hooks) and the
// CPU time of the server's main thread (INFO cpu, user+sys: commands, Lua,
// and socket I/O alike). Not commandstats' usec: it counts a command run
// inside a script twice, in the script's line and in its own.
type usage struct{ commands, redisUsec int64 }

func (e *env) usage(b *testing.B) usage {
	st := e.commandstats(b)
	u := usage{commands: e.hook.n.Load() + st["subscribe"][0] + st["unsubscribe"][0]}
	info, err := e.rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread") {
			secs, _ := strconv.ParseFloat(v, 64)
			u.redisUsec += int64(secs * 1e6)
		}
	}
	return u
}

func BenchmarkUncontended(b *testing.B) {
	for _, im := range impls {
		if im.clients > 1 {
			continue // one client is the uncontended case
		}
		b.Run(im.name, func(b *testing.B) {
			e := newEnv(b)
			l := im.build(b, e.rdb)
			var ids atomic.Int64
			b.SetParallelism(max(1, contenders/runtimeProcs()))
			before := e.usage(b)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				key := "u" + strconv.FormatInt(ids.Add(1), 10)
				ctx := context.Background()
				for pb.Next() {
					release, err := l.obtain(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
			b.StopTimer()
			b.ReportMetric(float64(e.usage(b).redisUsec-before.redisUsec)/float64(b.N), "redis-µs/op")
		})
	}
}

func BenchmarkHotKey(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			e := newEnv(b)
			clients := make([]locker, max(1, im.clients))
			for i := range clients {
				clients[i] = im.build(b, e.rdb)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			var (
				waitingSince = make([]time.Time, contenders) // zero: not waiting
				outOfOrder   int
				remaining    atomic.Int64
				releaseAt    atomic.Int64 // unix ns when the last holder began Release
				mu           sync.Mutex
				handoffs     = make([]time.Duration, 0, b.N)
				waits        = make([]time.Duration, 0, b.N)
				perWorker    = make([]int, contenders)
				wg           sync.WaitGroup
				before       = e.usage(b)
				obtainsDone  atomic.Int64
			)
			remaining.Store(int64(b.N))
			b.ResetTimer()
			start := time.Now()
			for w := range contenders {
				l := clients[w%len(clients)]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for remaining.Add(-1) >= 0 {
						t0 := time.Now()
						mu.Lock()
						waitingSince[w] = t0
						mu.Unlock()
						release, err := l.obtain(ctx, "hot")
						if err != nil {
							b.Error(err)
							return
						}
						got := time.Now()
						obtainsDone.Add(1)
						prev := releaseAt.Load()
						mu.Lock()
						// FIFO: the lock should go to whoever has waited longest
						// (1ms of slack for arrivals that tie on the wire).
						waitingSince[w] = time.Time{}
						for _, since := range waitingSince {
							if !since.IsZero() && since.Before(t0.Add(-time.Millisecond)) {
								outOfOrder++
								break
							}
						}
						if prev != 0 {
							handoffs = append(handoffs, got.Sub(time.Unix(0, prev)))
						}
						waits = append(waits, got.Sub(t0))
						perWorker[w]++
						mu.Unlock()
						releaseAt.Store(time.Now().UnixNano())
						if err := release(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			after := e.usage(b)

			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
			b.ReportMetric(micros(pct(handoffs, 50)), "p50-handoff-µs")
			b.ReportMetric(micros(pct(handoffs, 99)), "p99-handoff-µs")
			b.ReportMetric(micros(pct(waits, 50)), "p50-wait-µs")
			b.ReportMetric(micros(pct(waits, 99)), "p99-wait-µs")
			b.ReportMetric(float64(after.commands-before.commands)/float64(obtainsDone.Load()), "cmds/obtain")
			b.ReportMetric(float64(after.redisUsec-before.redisUsec)/float64(obtainsDone.Load()), "redis-µs/obtain")
			lo, hi := slices.Min(perWorker), slices.Max(perWorker)
			b.ReportMetric(float64(hi)/math.Max(1, float64(lo)), "max/min")
			b.ReportMetric(100*(1-float64(outOfOrder)/float64(obtainsDone.Load())), "fifo-%")
		})
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func runtimeProcs() int { return max(1, procs) }
