package presence_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What a heartbeat costs Redis's main thread (INFO cpu: where commands
// run, and the reads, writes and event-loop turns around them), on a
// redis-server with the append-only file as the stack runs it. Each its own
// batch (a round trip of ZADD, ZREMRANGEBYSCORE and PEXPIRE per set, two
// sets when watching a sale), back to back and paced one every 1.5 ms (667
// a second, the load-test kit's default crowd: each reaches an idle Redis,
// whose wake-up costs more than the commands); and 500 at once (shared
// batches). Beside them, for scale: a PING, the floor of any round trip,
// and the per-user rate limit's script (redisstore.Limiter), the other Redis call
// of POST /v1/presence. docs/benchmarks.md ("Presence") quotes these:
//
//	go test -run '^$' -bench Heartbeat_redisCPU -benchtime 2000x ./internal/presence/
func BenchmarkHeartbeat_redisCPU(b *testing.B) {
	srv := testenv.StartRedisWith(b, testenv.RedisConfig{AppendOnly: true, AppendFsync: "everysec"})
	rdb := srv.Client(b)
	ctx := context.Background()
	tr := presence.New(rdb, onSale{}, presence.Config{})
	b.Cleanup(tr.Close)
	var user atomic.Int64
	beat := func(act int64) func() error {
		return func() error { return tr.Heartbeat(ctx, presence.Client{UserID: user.Add(1)}, act) }
	}
	limits := redispipe.New(rdb)
	b.Cleanup(limits.Close)
	limiter := redisstore.NewLimiter(rdb, limits)
	oracle := redis_rate.NewLimiter(rdb)
	ops := []struct {
		name string
		op   func() error
	}{
		{"ping", func() error { return rdb.Ping(ctx).Err() }},
		{"heartbeat_watching_nothing", beat(0)},
		{"heartbeat_watching_a_sale", beat(7)},
		{"per_user_rate_limit", func() error {
			_, _, err := limiter.Allow(ctx, "user", strconv.FormatInt(user.Add(1), 10), 10)
			return err
		}},
		// What the limit cost before it kept its state in hashes: a key per
		// user (redis_rate, the limiter's test oracle).
		{"per_user_rate_limit_redis_rate", func() error {
			_, err := oracle.Allow(ctx, strconv.FormatInt(user.Add(1), 10), redis_rate.PerSecond(10))
			return err
		}},
	}
	for _, gap := range []time.Duration{0, 1500 * time.Microsecond} {
		for _, o := range ops {
			name := o.name + "/back_to_back"
			if gap > 0 {
				name = o.name + "/one_every_1.5ms"
			}
			b.Run(name, func(b *testing.B) {
				before := mainCPU(b, rdb)
				next := time.Now()
				for range b.N {
					time.Sleep(time.Until(next))
					next = next.Add(gap)
					if err := o.op(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(mainCPU(b, rdb)-before)/float64(time.Microsecond)/float64(b.N), "redis-µs/op")
			})
		}
	}
	b.Run("heartbeat_watching_a_sale/500_at_once", func(b *testing.B) {
		before := mainCPU(b, rdb)
		b.SetParallelism(250) // 500 goroutines on two cores
		b.RunParallel(func(pb *testing.PB) {
			op := beat(7)
			for pb.Next() {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(mainCPU(b, rdb)-before)/float64(time.Microsecond)/float64(b.N), "redis-µs/op")
	})
}

func mainCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	b.Helper()
	d, err := loadtest.RedisMainCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
