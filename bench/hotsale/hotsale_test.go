// Package hotsale measures one hot flash sale on a 3-master Redis Cluster
// with its stock in 1, 3 and 6 shards (activity.Shards): what each master's
// main thread spends per order, how busy each is, the busiest master's
// share, throughput and p99 — `make bench-hotsale`; docs/benchmarks.md,
// "One hot sale, many masters".
//
// Orders go through the order service's Redis path as an api runs it on a
// cluster (order.Service over redisstore.Orders, the per-user lock client,
// the per-user rate limit, the stock keeper pulling units between shards),
// called from conc goroutines (and conc for each master a sharded sale
// spans), with no HTTP and no task queue: the Redis side alone, which on
// this machine's two cores is not what an api's HTTP handling would let
// it reach. A control runs the same orders over three sales of one shard,
// one a master: what spreading costs on this machine whatever spreads it.
package hotsale

import (
	"context"
	"flag"
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

// conc is how many orders are in flight at once for a sale of one shard:
// its master near saturation (about 30 orders a script run). A sale in
// more shards runs at that same load, and again at conc for each master it
// spans: the same batching on each master as the one shard's had, which
// is what a master carrying its share of a sale too hot for one master
// sees (docs/benchmarks.md, "One hot sale, many masters").
const conc = 64

// warm is how many orders warm each run up (scripts loaded on every
// master, connections open) before it is measured.
const warm = 200

// result is one sub-benchmark's figures, for the comparison at the end.
type result struct {
	sales     int // 1, or the control: sales of one shard, one a master
	shards    int
	conc      int
	orders    int
	elapsed   time.Duration
	cpu       []time.Duration       // each master's main-thread CPU over the run
	runs      []testenv.CommandStat // each master's EVALSHA runs over the run: how the calls were batched
	holds     []string              // which shards each master holds
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

// perRun is about how many orders the busiest master ran a script for
// per run: its share of the sale's orders (users spread evenly over the
// shards) over its EVALSHA runs (the sale's place.lua and, with the limit
// on, the rate limit's too).
func (r result) perRun() float64 {
	i, _ := r.busiest()
	held := len(strings.Split(r.holds[i], ","))
	if r.holds[i] == "none" {
		held = 0
	}
	return float64(r.orders) * float64(held) / float64(r.shards*r.sales) / float64(max(r.runs[i].Calls, 1))
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
	// With the per-user rate limit (as the service runs, 10 a second;
	// on a cluster the user's budget in the sale, charged by the order's
	// script in the shard's slot), and without.
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
		r := run(b, rdb, nodes, []int64{950 + skewRuns.Add(1)}, 3, conc, 0, true)
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
		b.Logf("master %d (%s): %.1f µs/order, busy %.0f%%, holds %s; %d script runs, %.1f µs each", m, cluster.Nodes[m].Addr(),
			perOrder(r.cpu[m], r.orders), 100*r.cpu[m].Seconds()/r.elapsed.Seconds(), r.holds[m],
			r.runs[m].Calls, float64(r.runs[m].Usec)/float64(max(r.runs[m].Calls, 1)))
	}
	b.Logf("%d orders in %v (%d refused), %d transfers between shards; busiest master %d", r.orders, r.elapsed.Round(time.Millisecond), r.refused, r.transfers, busy)
}

// rounds is how often compare runs every load, round after round, so
// that the machine's drift (a VM's neighbours, its clock) falls on every
// load alike; each ratio is taken within its round, against that round's
// one shard, and the side by side gives their median and range.
var rounds = flag.Int("hotsale.rounds", 3, "rounds of every load in compare")

// compare runs the sale in 1, 3 and 6 shards (ids from id on), each at
// conc orders in flight and, sharded, at conc for each master it spans;
// then the control: the same orders over 3 sales of one shard, one a
// master (the best any spreading of the load can do on this machine, where
// three busy masters share two cores with the client); every load once a
// round, for rounds rounds; and prints them side by side.
func compare(b *testing.B, cluster *testenv.RedisCluster, rdb *redis.ClusterClient, nodes []*redis.Client, id int64, limit int) {
	type load struct{ sales, shards, conc int }
	loads := []load{{1, 1, conc}}
	for _, shards := range []int{3, 6} {
		loads = append(loads, load{1, shards, conc}, load{1, shards, conc * min(shards, len(nodes))})
	}
	loads = append(loads, load{len(nodes), 1, conc}, load{len(nodes), 1, conc * len(nodes)})
	results := make([][]result, *rounds) // each sub-benchmark's last run (the testing package runs it with b.N 1 first)
	for round := range results {
		results[round] = make([]result, len(loads))
		for i, l := range loads {
			name := fmt.Sprintf("round=%d/shards=%d/conc=%d", round+1, l.shards, l.conc)
			if l.sales > 1 {
				name = fmt.Sprintf("round=%d/control/sales=%d/conc=%d", round+1, l.sales, l.conc)
			}
			b.Run(name, func(b *testing.B) {
				sale := id*1000 + int64(round*len(loads)+i)
				ids := []int64{sale}
				if l.sales > 1 {
					ids = salesOnEachMaster(b, rdb, sale*10, len(nodes))
				}
				r := run(b, rdb, nodes, ids, l.shards, l.conc, limit, false)
				results[round][i] = r
				report(b, cluster, r)
			})
		}
	}
	for _, rr := range results {
		for _, r := range rr {
			if r.orders == 0 {
				return
			}
		}
	}
	var lines []string
	for i := range loads {
		x := seriesOf(results, i)
		r := results[0][i]
		what := fmt.Sprintf("shards %d", r.shards)
		if r.sales > 1 {
			what = fmt.Sprintf("control, %d sales of 1 shard", r.sales)
		}
		lines = append(lines, fmt.Sprintf("%s, %d in flight: busiest master %s%% of 1 shard's; all masters %s× 1 shard's; %s orders a script run on the busiest; %s orders/s; p99 %s ms",
			what, r.conc, spread(x.busiest, "%.0f"), spread(x.all, "%.2f"), spread(x.perRun, "%.1f"), spread(x.rate, "%.0f"), spread(x.p99, "%.1f")))
	}
	// The parent of sub-benchmarks prints no result line, nor its logs.
	fmt.Printf("side by side (%s), median of %d rounds (min–max):\n%s\n", b.Name(), *rounds, strings.Join(lines, "\n"))
}

// spread is xs's median and, for more than one, its range, each in format.
func spread(xs []float64, format string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf(format, med)
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", med, s[0], s[len(s)-1])
}

// run places b.N orders of one unit each in new sales ids of shards shards
// each (a user's orders all in one of them), inFlight at a time, each user
// limited to limit orders a second (0: none), and measures each master.
func run(b *testing.B, rdb *redis.ClusterClient, nodes []*redis.Client, ids []int64, shards, inFlight, limit int, skewed bool) result {
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
	for _, id := range ids {
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
	}
	holds := holdsOf(ctx, b, rdb, nodes, ids, shards)
	saleOf := func(u int64) int64 { return ids[u%int64(len(ids))] }
	// Warm: scripts loaded on every master, connections open.
	for u := int64(1); u <= warm; u++ {
		_, _ = svc.Place(ctx, order.PlaceRequest{ActivityID: saleOf(u), UserID: 5_000_000 + u, Quantity: 1})
	}
	before := snapshot(ctx, b, nodes)
	var next atomic.Int64
	var refused atomic.Int64
	lat := make([][]time.Duration, inFlight)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(ids[0]), uint64(g)))
			for next.Add(1) <= int64(b.N) {
				u := 1 + rng.Int64N(2_000_000)
				for skewed && activity.ShardOf(u, shards) != 1 {
					u = 1 + rng.Int64N(2_000_000)
				}
				t := time.Now()
				_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: saleOf(u), UserID: u, Quantity: 1})
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
	after := snapshot(ctx, b, nodes)
	r := result{sales: len(ids), shards: shards, conc: inFlight, orders: b.N, elapsed: elapsed, holds: holds, refused: int(refused.Load())}
	if r.refused > 0 {
		// A refused order costs less than an accepted one: the figures
		// would flatter the run.
		b.Fatalf("%d of %d orders refused: every order must be accepted for the cost per order to mean anything", r.refused, b.N)
	}
	r.cpu, r.runs = after.since(before)
	all := slices.Concat(lat...)
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		r.p99 = all[len(all)*99/100]
	}
	for _, id := range ids {
		for sh := 0; sh < shards; sh++ {
			m, _ := rdb.HGet(ctx, rediskeys.ForShard(id, sh, shards).Meta, "moves").Int64()
			r.transfers += m
		}
	}
	r.transfers /= 2 // each transfer counts in its donor and its receiver
	return r
}

// salesOnEachMaster is n sale ids from id on whose (one-shard) keys are
// each on another master.
func salesOnEachMaster(b *testing.B, rdb *redis.ClusterClient, id int64, n int) []int64 {
	seen := map[string]bool{}
	var ids []int64
	for ; len(ids) < n; id++ {
		addr := masterOf(context.Background(), b, rdb, rediskeys.ForShard(id, 0, 1).Meta)
		if !seen[addr] {
			seen[addr] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// reading is each node's main-thread CPU and EVALSHA figures at a moment.
type reading struct {
	cpu  []time.Duration
	runs []testenv.CommandStat
}

// snapshot reads every node.
func snapshot(ctx context.Context, b *testing.B, nodes []*redis.Client) reading {
	var r reading
	for _, n := range nodes {
		c, err := loadtest.RedisMainCPU(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		st, err := testenv.CommandStats(ctx, n)
		if err != nil {
			b.Fatal(err)
		}
		r.cpu, r.runs = append(r.cpu, c), append(r.runs, st["evalsha"])
	}
	return r
}

// since is each node's CPU and EVALSHA figures from before to r.
func (r reading) since(before reading) ([]time.Duration, []testenv.CommandStat) {
	cpu := make([]time.Duration, len(r.cpu))
	runs := make([]testenv.CommandStat, len(r.runs))
	for m := range r.cpu {
		cpu[m] = r.cpu[m] - before.cpu[m]
		runs[m] = testenv.CommandStat{Calls: r.runs[m].Calls - before.runs[m].Calls, Usec: r.runs[m].Usec - before.runs[m].Usec}
	}
	return cpu, runs
}

// holdsOf is, for each of nodes, which shards of sales ids (shards each)
// it holds: "0,2", or "sale 7" for sales of one shard among several, or
// "none".
func holdsOf(ctx context.Context, b *testing.B, rdb *redis.ClusterClient, nodes []*redis.Client, ids []int64, shards int) []string {
	holds := make([]string, len(nodes))
	for _, id := range ids {
		for sh := 0; sh < shards; sh++ {
			addr := masterOf(ctx, b, rdb, rediskeys.ForShard(id, sh, shards).Meta)
			for m, n := range nodes {
				if n.Options().Addr == addr {
					name := strconv.Itoa(sh)
					if len(ids) > 1 {
						name = "sale " + strconv.FormatInt(id, 10)
					}
					holds[m] = strings.TrimPrefix(holds[m]+","+name, ",")
				}
			}
		}
	}
	for m := range holds {
		if holds[m] == "" {
			holds[m] = "none"
		}
	}
	return holds
}

// masterOf is the address of the master holding key's slot.
func masterOf(ctx context.Context, b *testing.B, rdb *redis.ClusterClient, key string) string {
	node, err := rdb.MasterForKey(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	return node.Options().Addr
}

// series is one load's figures over the rounds, each against its round's
// one shard (results[round][0]).
type series struct{ busiest, all, busy, perRun, rate, p99 []float64 }

func seriesOf(results [][]result, i int) series {
	var s series
	for _, rr := range results {
		one, r := rr[0], rr[i]
		_, c1 := one.busiest()
		_, c := r.busiest()
		s.busiest = append(s.busiest, 100*perOrder(c, r.orders)/perOrder(c1, one.orders))
		s.all = append(s.all, perOrder(r.sum(), r.orders)/perOrder(one.sum(), one.orders))
		s.busy = append(s.busy, 100*c.Seconds()/r.elapsed.Seconds())
		s.perRun = append(s.perRun, r.perRun())
		s.rate = append(s.rate, float64(r.orders)/r.elapsed.Seconds())
		s.p99 = append(s.p99, float64(r.p99.Microseconds())/1000)
	}
	return s
}
