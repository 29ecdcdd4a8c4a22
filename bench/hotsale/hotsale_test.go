// Package hotsale measures one hot flash sale on a 3-master Redis Cluster
// with its stock in 1, 3 and 6 shards (activity.Shards): what each master's
// main thread spends per order, how busy each is, the busiest master's
// share, throughput and p99 — `make bench-hotsale`; docs/benchmarks.md,
// "One hot sale, many masters".
//
// Orders go through the order service's Redis path as an api runs it on a
// cluster (order.Service over redisstore.Orders, the per-user lock client,
// the per-user rate limit, the stock keeper pulling units between shards),
// called from Conc goroutines, with no HTTP and no task queue: the Redis
// side alone, which on this machine's two cores is not what an api's
// HTTP handling would let it reach.
package hotsale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// conc is how many orders are in flight at once: Redis near saturation.
const conc = 64

// warm is how many orders warm each run up (scripts loaded on every
// master, connections open) before it is measured.
const warm = 200

// result is one sub-benchmark's figures, for the comparison at the end.
type result struct {
	shards    int
	orders    int
	elapsed   time.Duration
	cpu       []time.Duration // each master's main-thread CPU over the run
	holds     []string        // which shards each master holds
	p99       time.Duration
	refused   int
	transfers int64
}

func (r result) sum() time.Duration {
	var s time.Duration
	for _, c := range r.cpu {
		s += c
	}
	return s
}

func (r result) busiest() (int, time.Duration) {
	i := 0
	for j, c := range r.cpu {
		if c > r.cpu[i] {
			i = j
		}
	}
	return i, r.cpu[i]
}

func perOrder(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

func BenchmarkHotSale(b *testing.B) {
	cluster := testenv.StartRedisCluster(b, 3)
	rdb := cluster.Client(b)
	nodes := make([]*redis.Client, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		nodes[i] = redis.NewClient(&redis.Options{Addr: n.Addr()})
		b.Cleanup(func() { _ = nodes[i].Close() })
	}
	// With the per-user rate limit (as the service runs, 10 a second), and
	// without: a user's limit is one budget over every sale, kept under the
	// user's own key on whichever master its slot is, so its cost is
	// spread over the masters whatever the sale's shards; without it, what
	// is left is the sale's own.
	for li, limit := range []int{10, 0} {
		name := "limit=on"
		if limit == 0 {
			name = "limit=off"
		}
		b.Run(name, func(b *testing.B) { compare(b, cluster, rdb, nodes, int64(900+10*li), limit) })
	}
	// What moving units costs: the sale in 3 shards holds exactly the
	// orders' units, and every shopper is of shard 1, so two thirds of the
	// units are pulled over from the other shards as shard 1 runs dry,
	// down to the last unit (an order refused fails the run: none may be
	// stranded).
	b.Run("limit=off/skewed/shards=3", func(b *testing.B) {
		r := run(b, rdb, nodes, 950+skewRuns.Add(1), 3, 0, true)
		report(b, cluster, r)
	})
}

// skewRuns numbers the skewed runs: each (b.N 1 first, then the count
// asked for) a sale of its own, its stock exactly its orders'.
var skewRuns atomic.Int64

// report reports r's figures and logs each master's.
func report(b *testing.B, cluster *testenv.RedisCluster, r result) {
	busy, cpu := r.busiest()
	b.ReportMetric(float64(r.orders)/r.elapsed.Seconds(), "orders/s")
	b.ReportMetric(perOrder(r.sum(), r.orders), "redis-µs/order")
	b.ReportMetric(perOrder(cpu, r.orders), "busiest-µs/order")
	b.ReportMetric(100*cpu.Seconds()/r.elapsed.Seconds(), "busiest-busy%")
	b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(r.transfers), "transfers")
	for m := range r.cpu {
		b.Logf("master %d (%s): %.1f µs/order, busy %.0f%%, holds %s", m, cluster.Nodes[m].Addr(),
			perOrder(r.cpu[m], r.orders), 100*r.cpu[m].Seconds()/r.elapsed.Seconds(), r.holds[m])
	}
	b.Logf("%d orders in %v (%d refused), %d transfers between shards; busiest master %d", r.orders, r.elapsed.Round(time.Millisecond), r.refused, r.transfers, busy)
}

// compare runs the sale in 1, 3 and 6 shards (ids from id on) and logs
// them side by side.
func compare(b *testing.B, cluster *testenv.RedisCluster, rdb *redis.ClusterClient, nodes []*redis.Client, id int64, limit int) {
	results := make([]result, 3) // each sub-benchmark's last run (the testing package runs it with b.N 1 first)
	for i, shards := range []int{1, 3, 6} {
		b.Run("shards="+strconv.Itoa(shards), func(b *testing.B) {
			r := run(b, rdb, nodes, id+int64(i), shards, limit, false)
			results[i] = r
			report(b, cluster, r)
		})
	}
	if results[0].orders > 0 && results[1].orders > 0 && results[2].orders > 0 {
		_, one := results[0].busiest()
		onePer := perOrder(one, results[0].orders)
		var lines []string
		for _, r := range results {
			_, c := r.busiest()
			lines = append(lines, fmt.Sprintf("shards %d: busiest master %.1f µs/order = %.0f%% of 1 shard's; all masters %.1f µs/order = %.2f× 1 shard's; %.0f orders/s; p99 %v",
				r.shards, perOrder(c, r.orders), 100*perOrder(c, r.orders)/onePer, perOrder(r.sum(), r.orders),
				perOrder(r.sum(), r.orders)/perOrder(results[0].sum(), results[0].orders), float64(r.orders)/r.elapsed.Seconds(), r.p99.Round(10*time.Microsecond)))
		}
		// The parent of sub-benchmarks prints no result line, nor its logs.
		fmt.Printf("side by side (%s):\n%s\n", b.Name(), strings.Join(lines, "\n"))
	}
}

// run places b.N orders of one unit each in a new sale id of shards shards,
// conc at a time, each user limited to limit orders a second (0: none),
// and measures each master.
func run(b *testing.B, rdb *redis.ClusterClient, nodes []*redis.Client, id int64, shards, limit int, skewed bool) result {
	ctx := context.Background()
	pipe := redispipe.New(rdb)
	b.Cleanup(pipe.Close)
	locks := lock.NewClient(rdb, lock.Config{Prefix: rediskeys.LockPrefix, Pipeline: pipe})
	b.Cleanup(func() { _ = locks.Close() })
	keeper := stock.New(rdb, stock.Config{})
	store := redisstore.New(rdb, redisstore.Config{Locks: locks, Shards: keeper})
	b.Cleanup(store.Close)
	svc := order.NewService(order.Deps{
		Store: store, Locks: redisstore.Locks{Locker: locks}, Tasks: ordertest.NoTasks{}, SoldOut: keeper,
		Limits: redisstore.NewLimiter(rdb, pipe), Log: ordertest.Log(),
	}, order.Config{UserRPS: limit})
	a := activity.Activity{
		ID: id, Type: activity.Seckill, Name: "hot", SKU: "HOT-1", PriceCents: 100, TotalStock: activity.MaxStock,
		PerUserLimit: activity.MaxPerUserLimit, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour),
		PaymentTTL: time.Hour, Shards: shards, Status: activity.Published,
	}
	if skewed {
		a.TotalStock = b.N + warm // exactly the orders' units
	}
	if _, err := keeper.Load(ctx, a); err != nil {
		b.Fatal(err)
	}
	holds := make([]string, len(nodes))
	for sh := 0; sh < shards; sh++ {
		addr := masterOf(ctx, b, rdb, rediskeys.ForShard(id, sh, shards).Meta)
		for m, n := range nodes {
			if n.Options().Addr == addr {
				holds[m] = strings.TrimPrefix(holds[m]+","+strconv.Itoa(sh), ",")
			}
		}
	}
	for m := range holds {
		if holds[m] == "" {
			holds[m] = "none"
		}
	}
	// Warm: scripts loaded on every master, connections open.
	for u := int64(1); u <= warm; u++ {
		_, _ = svc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 5_000_000 + u, Quantity: 1})
	}
	before := cpus(ctx, b, nodes)
	var next atomic.Int64
	var refused atomic.Int64
	lat := make([][]time.Duration, conc)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), uint64(g)))
			for next.Add(1) <= int64(b.N) {
				u := 1 + rng.Int64N(2_000_000)
				for skewed && activity.ShardOf(u, shards) != 1 {
					u = 1 + rng.Int64N(2_000_000)
				}
				t := time.Now()
				_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: u, Quantity: 1})
				lat[g] = append(lat[g], time.Since(t))
				if err != nil {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after := cpus(ctx, b, nodes)
	r := result{shards: shards, orders: b.N, elapsed: elapsed, holds: holds, refused: int(refused.Load())}
	if r.refused > 0 {
		// A refused order costs less than an accepted one: the figures
		// would flatter the run.
		b.Fatalf("%d of %d orders refused: every order must be accepted for the cost per order to mean anything", r.refused, b.N)
	}
	for m := range nodes {
		r.cpu = append(r.cpu, after[m]-before[m])
	}
	all := slices.Concat(lat...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		r.p99 = all[len(all)*99/100]
	}
	for sh := 0; sh < shards; sh++ {
		m, _ := rdb.HGet(ctx, rediskeys.ForShard(id, sh, shards).Meta, "moves").Int64()
		r.transfers += m
	}
	r.transfers /= 2 // each transfer counts in its donor and its receiver
	return r
}

// cpus is each node's main-thread CPU so far.
func cpus(ctx context.Context, b *testing.B, nodes []*redis.Client) []time.Duration {
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		c, err := loadtest.RedisMainCPU(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = c
	}
	return out
}

// masterOf is the address of the master holding key's slot.
func masterOf(ctx context.Context, b *testing.B, rdb *redis.ClusterClient, key string) string {
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		b.Fatal(err)
	}
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	b.Fatalf("no master holds slot %d", slot)
	return ""
}
