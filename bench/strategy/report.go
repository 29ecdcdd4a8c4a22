package main

// The report: the table and the targets, in Markdown for docs/benchmarks.md,
// and the machine they were measured on.

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/flashsale/flashsale/bench/internal/rediscost"
	"github.com/flashsale/flashsale/internal/loadtest"
)

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// results are a run's figures: the rows', and the rest.
type results struct {
	rows        []*row
	e2e         *row // (b)+worker; nil with -launch
	lag         loadtest.Lag
	lagAfter    time.Duration
	backlog     int64         // the drain's (0 with -launch: none)
	drain       time.Duration // 0 with -launch
	persistRate float64
	whole       *row              // (f)+worker
	baseline    *row              // (f)+worker@base, with -baseline; else nil
	hooked      *row              // (f)+worker+hook
	hookedOwn   *row              // (f)+worker+hook+redis
	soldOut     *loadtest.Result  // nil with -launch
	hello       *loadtest.Result  // nil with -launch
	polls       *loadtest.Result  // a waiting room's poll; nil with -launch
	rss         map[string]int64  // peak resident memory by process
	cost        []rediscost.Phase // nil with -launch or -cost-orders 0
}

// print writes the report of one run to stdout.
func (b *bench) print(ctx context.Context, res results) error {
	redisInfo, _ := b.rdb.Info(ctx, "server").Result()
	var mariadb string
	_ = b.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&mariadb)
	command := "`make bench-strategy`"
	if b.o.launch {
		command = "`make bench-strategy STRATEGY_FLAGS=-launch`"
	}
	fmt.Printf("### Strategy benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("Machine: %s, %d CPUs; redis %s; MariaDB %s; %s. Command: %s "+
		"(wrk -t%d -c%d, %v per throughput run, %d runs a row; %d users rotating, fresh users minted for %d orders/s; every process on this one machine).\n\n",
		loadtest.CPUModel(), runtime.NumCPU(), field(redisInfo, "redis_version"), mariadb, runtime.Version(), command,
		b.o.threads, b.o.conns, b.o.duration, b.o.repeat, b.o.users, b.o.freshRate)
	all := res.rows
	if res.e2e != nil {
		all = append(all, res.e2e)
	}
	all = append(all, res.wholeRows()...)
	fmt.Printf("| row | strategy | orders/s (mean of %d; range) | p50 | p99 | Redis commands/order: sent / run | Redis CPU µs/order | server CPU µs/order | oversold |\n", b.o.repeat)
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	byKey := map[string]*row{}
	for _, r := range all {
		byKey[r.key] = r
		spread := ""
		if len(r.runs) > 1 {
			spread = fmt.Sprintf(" (%.0f–%.0f)", r.lo, r.hi)
		}
		sent := "–"
		if r.tripsPerOrder > 0 {
			sent = fmt.Sprintf("%.1f", r.tripsPerOrder)
		}
		fmt.Printf("| %s | %s | %.0f%s | %v | %v | %s / %.1f | %.1f | %.0f | %d |\n", r.key, r.name, r.rps, spread, round(r.p50), round(r.p99), sent, r.cmdsPerOrder, r.redisUS, r.serverUS, r.oversold)
	}
	fmt.Println()
	printLaunch(os.Stdout, b.o, launchRows(res.rows, res.wholeRows()...))
	printByCommand(os.Stdout, launchRows(res.rows, res.wholeRows()...))
	fmt.Println()
	if res.soldOut != nil {
		printFrontDoor(os.Stdout, *res.soldOut, *res.polls, *res.hello)
	}
	if res.drain > 0 {
		fmt.Printf("- Worker persistence into MariaDB: a backlog of %d orders written in %v = %.0f orders/s (one worker, WORKER_CONCURRENCY 64).\n",
			res.backlog, res.drain.Round(10*time.Millisecond), res.persistRate)
	}
	if res.e2e != nil {
		fmt.Printf("- Persistence lag with the worker running during (b)+worker (%.0f orders/s accepted): %v; MySQL caught up %v after the load ended.\n",
			res.e2e.rps, res.lag, res.lagAfter.Round(10*time.Millisecond))
	}
	names := []string{}
	for n, v := range res.rss {
		names = append(names, fmt.Sprintf("%s %.0f MB", n, float64(v)/(1<<20)))
	}
	sort.Strings(names)
	fmt.Printf("- Peak resident memory (VmHWM): %s.\n", strings.Join(names, ", "))
	if res.cost != nil {
		fmt.Printf("- Redis main-thread CPU per order at saturation, phase by phase (`REDISCOST_FLAGS=\"-orders %d -conc 64 -items 3\" make bench-rediscost`, in this run, on a stack of its own):\n\n", b.o.costOrders)
		rediscost.Print(os.Stdout, costOptions(b.o), res.cost)
		fmt.Println()
	}
	for _, r := range all {
		if r.errors > 0 {
			fmt.Printf("- %s: %d transport errors or timeouts; answers %v.\n", r.key, r.errors, r.codes)
		}
	}
	b.printTargets(res, byKey)
	return nil
}

// printTargets judges the targets the run has the rows for.
func (b *bench) printTargets(res results, byKey map[string]*row) {
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	oversold := int64(0)
	for _, r := range res.rows {
		oversold += r.oversold
	}
	maxRSS := int64(0)
	for _, v := range res.rss {
		maxRSS = max(maxRSS, v)
	}
	a, bb, c, d := byKey["(a)"], byKey["(b)"], byKey["(c)"], byKey["(d)"]
	fmt.Println("\nTargets:")
	fmt.Printf("- (b) ≥ 50%% of (a): %.0f%% — %s\n", 100*bb.rps/a.rps, check(bb.rps >= a.rps/2))
	if d != nil {
		fmt.Printf("- (b) ≥ 5× (d): %.1f× — %s\n", bb.rps/d.rps, check(bb.rps >= 5*d.rps))
	}
	if c != nil {
		fmt.Printf("- the per-user lock costs at most 10%%, (b) ≥ 90%% of (c): %.0f%% — %s\n", 100*bb.rps/c.rps, check(bb.rps >= 0.9*c.rps))
		if h := byKey["(b′)"]; h != nil {
			fmt.Printf("  (the lock taken for every order, (b′), is %.0f%% of (c) and %.0f%% of (b))\n", 100*h.rps/c.rps, 100*h.rps/bb.rps)
		}
	}
	if res.cost != nil {
		total := us(rediscost.Total(res.cost))
		fmt.Printf("- Redis main-thread CPU ≤ 20 µs per order at saturation, everything included, per phase: %.1f µs — %s\n", total, check(total <= 20))
	} else {
		fmt.Println("- Redis main-thread CPU ≤ 20 µs per order at saturation: not measured (-cost-orders 0 or -launch)")
	}
	busy := func(r *row) float64 { return r.rps * r.redisUS / 1e4 } // % of one core
	if e2e := res.e2e; e2e != nil {
		fmt.Printf("  (end to end, at what the api makes on these cores: (b)+worker %.1f µs at %.0f orders/s, Redis's main thread %.0f%% busy; (b) alone %.1f µs at %.0f/s, %.0f%% busy)\n",
			e2e.redisUS, e2e.rps, busy(e2e), bb.redisUS, bb.rps, busy(bb))
	}
	if res.soldOut != nil {
		fmt.Printf("- sold-out ≥ 90%% of hello: %.0f%% — %s\n", 100*res.soldOut.RPS()/res.hello.RPS(), check(res.soldOut.RPS() >= 0.9*res.hello.RPS()))
	}
	fmt.Printf("- p99 ≤ 20 ms on (b): %v — %s\n", round(bb.p99), check(bb.p99 <= 20*time.Millisecond))
	if res.drain > 0 {
		fmt.Printf("- persistence ≥ 5,000 orders/s: %.0f — %s\n", res.persistRate, check(res.persistRate >= 5000))
	}
	if res.e2e != nil {
		fmt.Printf("- persistence lag p99 ≤ 2 s: %v — %s\n", round(res.lag.P99), check(res.lag.P99 <= 2*time.Second))
	}
	fmt.Printf("- api and worker < 150 MB: max %.0f MB — %s\n", float64(maxRSS)/(1<<20), check(maxRSS < 150<<20))
	fmt.Printf("- oversold 0 in every row: %d — %s\n", oversold, check(oversold == 0))
}

func round(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

func field(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

// printFrontDoor writes the sold-out path, a waiting room's poll and gin's
// hello, side by side, with the issues' ratios.
func printFrontDoor(w io.Writer, soldOut, polls, hello loadtest.Result) {
	fmt.Fprintf(w, "- Sold-out path (our api, 409 SOLD_OUT): %.0f answers/s, p99 %v; gin hello: %.0f/s, p99 %v (%.0f%% of hello).\n",
		soldOut.RPS(), round(soldOut.P99), hello.RPS(), round(hello.P99), 100*soldOut.RPS()/hello.RPS())
	fmt.Fprintf(w, "- A waiting room's poll (GET .../queue, a shopper waiting: %v): %.0f answers/s, p99 %v: %.0f%% of the sold-out path's "+
		"(issue 42: ≥ 80%%), %.0f%% of hello.\n", polls.Codes, polls.RPS(), round(polls.P99), 100*polls.RPS()/soldOut.RPS(),
		100*polls.RPS()/hello.RPS())
}

// wholeRows are the whole system's rows that ran, in the report's order.
func (res results) wholeRows() []*row {
	var out []*row
	for _, r := range []*row{res.whole, res.baseline, res.hooked, res.hookedOwn} {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}
