package hotsale

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
)

// httpFor is how long each load of BenchmarkHotSaleHTTP runs wrk.
var httpFor = flag.Duration("hotsale.http", 8*time.Second, "how long BenchmarkHotSaleHTTP runs wrk on each load")

// httpConns is wrk's connections: the same load for every sale.
const httpConns = 64

// httpDone: the testing package calls a benchmark without sub-benchmarks
// again with the b.N asked for; the stack and its runs are once.
var httpDone bool

// BenchmarkHotSaleHTTP is the whole service on a 3-master cluster: a stack
// of real processes (loadtest.StartStack with Cluster 3: an api and a
// worker on REDIS_CLUSTER=true, MariaDB) and wrk placing orders over HTTP,
// 64 connections of shoppers drawn from 100,000 tokens, for one sale in 1,
// 3 and 6 shards, round after round; each master's main-thread CPU per
// accepted order, its busy share, the busiest's against the one shard's,
// throughput and p99. On this machine's two cores the api, not Redis, sets
// the pace: the masters are far from saturation (docs/benchmarks.md, "One
// hot sale, many masters").
func BenchmarkHotSaleHTTP(b *testing.B) {
	if httpDone {
		return
	}
	httpDone = true
	ctx := context.Background()
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Cluster: 3,
		Env: []string{"RATE_LIMIT_IP_RPS=0"}}) // the per-user limit on, as by default; every client here is one IP
	if err != nil {
		b.Fatal(err)
	}
	defer stack.Close()
	nodes := make([]*redis.Client, len(stack.Cluster.Nodes))
	for i, n := range stack.Cluster.Nodes {
		nodes[i] = redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer nodes[i].Close()
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{stack.Cluster.Nodes[0].Addr()}})
	defer rdb.Close()
	tokens := filepath.Join(stack.Dir, "tokens.tsv")
	if err := loadtest.WriteTokens(tokens, stack.JWTSecret, 1, 100_000, 2*time.Hour); err != nil {
		b.Fatal(err)
	}
	wrk := func(id int64, d time.Duration) (loadtest.Result, error) {
		return loadtest.RunWrk(ctx, loadtest.WrkRun{URL: stack.URL, Activity: id, TokensFile: tokens, Threads: 2,
			Conns: httpConns, Duration: d, Dir: stack.Dir})
	}
	shardsOf := []int{1, 3, 6}
	results := make([][]result, *rounds)
	for round := range results {
		for _, shards := range shardsOf {
			id, err := loadtest.CreateSale(ctx, stack.URL, stack.AdminToken, loadtest.Sale{Stock: 10_000_000, Limit: 1000, Shards: shards})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := wrk(id, time.Second); err != nil { // warm: scripts on every master, connections
				b.Fatal(err)
			}
			before := snapshot(ctx, b, nodes)
			res, err := wrk(id, *httpFor)
			if err != nil {
				b.Fatal(err)
			}
			after := snapshot(ctx, b, nodes)
			accepted := res.Codes["202"]
			if other := res.Requests - accepted; accepted == 0 || other > res.Requests/100 || res.Errors > 0 {
				b.Fatalf("round %d, %d shards: %d of %d answers not 202 (%v), %d errors: the cost per order would not be an accepted order's", round+1, shards, other, res.Requests, res.Codes, res.Errors)
			}
			r := result{sales: 1, shards: shards, conc: httpConns, orders: int(accepted),
				elapsed: time.Duration(res.Seconds * float64(time.Second)), p99: res.P99, holds: holdsOf(ctx, b, rdb, nodes, []int64{id}, shards)}
			r.cpu, r.runs = after.since(before)
			results[round] = append(results[round], r)
			for m := range r.cpu {
				fmt.Printf("round %d, %d shards: master %d %.1f µs/order, busy %.0f%%, holds %s; %d script runs\n", round+1, shards, m,
					perOrder(r.cpu[m], r.orders), 100*r.cpu[m].Seconds()/r.elapsed.Seconds(), r.holds[m], r.runs[m].Calls)
			}
		}
	}
	var lines []string
	for i := range shardsOf {
		x := seriesOf(results, i)
		lines = append(lines, fmt.Sprintf("shards %d: busiest master %s%% of 1 shard's, %s%% busy; all masters %s× 1 shard's; %s orders/s; p99 %s ms",
			shardsOf[i], spread(x.busiest, "%.0f"), spread(x.busy, "%.0f"), spread(x.all, "%.2f"), spread(x.rate, "%.0f"), spread(x.p99, "%.1f")))
	}
	fmt.Printf("side by side (%s: an api and a worker over HTTP, wrk %d connections, %v a load), median of %d rounds (min–max):\n%s\n",
		b.Name(), httpConns, *httpFor, *rounds, strings.Join(lines, "\n"))
}
