package main

// The report: the table and the targets, in Markdown for docs/benchmarks.md,
// and the machine they were measured on.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/flashsale/flashsale/bench/internal/rediscost"
	"github.com/flashsale/flashsale/internal/loadtest"
)

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// print writes the report of one run to stdout.
func (b *bench) print(ctx context.Context, rows []*row, e2e *row, lag loadtest.Lag, lagAfter time.Duration, backlog int64,
	drain time.Duration, persistRate float64, soldOut, hello loadtest.Result, rss map[string]int64, cost []rediscost.Phase) error {
	redisInfo, _ := b.rdb.Info(ctx, "server").Result()
	var mariadb string
	_ = b.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&mariadb)
	fmt.Printf("### Strategy benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("Machine: %s, %d CPUs; redis %s; MariaDB %s; %s. Command: `make bench-strategy` "+
		"(wrk -t%d -c%d, %v per throughput run, %d users rotating; every process on this one machine).\n\n",
		cpuModel(), runtime.NumCPU(), field(redisInfo, "redis_version"), mariadb, runtime.Version(), b.o.threads, b.o.conns, b.o.duration, b.o.users)
	fmt.Printf("| row | strategy | orders/s (mean of %d; range) | p50 | p99 | Redis commands/order: sent / run | Redis CPU µs/order | server CPU µs/order | oversold |\n", b.o.repeat)
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|")
	byKey := map[string]*row{}
	for _, r := range append(rows, e2e) {
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
	fmt.Printf("- Sold-out path (our api, 409 SOLD_OUT): %.0f answers/s, p99 %v; gin hello: %.0f/s, p99 %v (%.0f%% of hello).\n",
		soldOut.RPS(), round(soldOut.P99), hello.RPS(), round(hello.P99), 100*soldOut.RPS()/hello.RPS())
	fmt.Printf("- Worker persistence into MariaDB: a backlog of %d orders written in %v = %.0f orders/s (one worker, WORKER_CONCURRENCY 64).\n",
		backlog, drain.Round(10*time.Millisecond), persistRate)
	fmt.Printf("- Persistence lag with the worker running during (b)+worker (%.0f orders/s accepted): %v; MySQL caught up %v after the load ended.\n",
		e2e.rps, lag, lagAfter.Round(10*time.Millisecond))
	names := []string{}
	for n, v := range rss {
		names = append(names, fmt.Sprintf("%s %.0f MB", n, float64(v)/(1<<20)))
	}
	fmt.Printf("- Peak resident memory (VmHWM): %s.\n", strings.Join(names, ", "))
	if cost != nil {
		fmt.Printf("- Redis main-thread CPU per order at saturation, phase by phase (`REDISCOST_FLAGS=\"-orders %d -conc 64\" make bench-rediscost`, in this run, on a stack of its own):\n\n", b.o.costOrders)
		rediscost.Print(os.Stdout, costOptions(b.o), cost)
		fmt.Println()
	}
	for _, r := range append(rows, e2e) {
		if r.errors > 0 {
			fmt.Printf("- %s: %d transport errors or timeouts; answers %v.\n", r.key, r.errors, r.codes)
		}
	}

	a, bb, d := byKey["(a)"], byKey["(b)"], byKey["(d)"]
	check := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	oversold := int64(0)
	for _, r := range rows {
		oversold += r.oversold
	}
	maxRSS := int64(0)
	for _, v := range rss {
		maxRSS = max(maxRSS, v)
	}
	fmt.Println("\nTargets:")
	fmt.Printf("- (b) ≥ 50%% of (a): %.0f%% — %s\n", 100*bb.rps/a.rps, check(bb.rps >= a.rps/2))
	fmt.Printf("- (b) ≥ 5× (d): %.1f× — %s\n", bb.rps/d.rps, check(bb.rps >= 5*d.rps))
	c := byKey["(c)"]
	fmt.Printf("- the per-user lock costs at most 10%%, (b) ≥ 90%% of (c): %.0f%% — %s\n", 100*bb.rps/c.rps, check(bb.rps >= 0.9*c.rps))
	if h := byKey["(b′)"]; h != nil {
		fmt.Printf("  (the lock taken for every order, (b′), is %.0f%% of (c) and %.0f%% of (b))\n", 100*h.rps/c.rps, 100*h.rps/bb.rps)
	}
	if cost != nil {
		total := us(rediscost.Total(cost))
		fmt.Printf("- Redis main-thread CPU ≤ 20 µs per order at saturation, everything included, per phase: %.1f µs — %s\n", total, check(total <= 20))
	} else {
		fmt.Println("- Redis main-thread CPU ≤ 20 µs per order at saturation: not measured (-cost-orders 0)")
	}
	busy := func(r *row) float64 { return r.rps * r.redisUS / 1e4 } // % of one core
	fmt.Printf("  (end to end, at what the api makes on these cores: (b)+worker %.1f µs at %.0f orders/s, Redis's main thread %.0f%% busy; (b) alone %.1f µs at %.0f/s, %.0f%% busy)\n",
		e2e.redisUS, e2e.rps, busy(e2e), bb.redisUS, bb.rps, busy(bb))
	fmt.Printf("- sold-out ≥ 90%% of hello: %.0f%% — %s\n", 100*soldOut.RPS()/hello.RPS(), check(soldOut.RPS() >= 0.9*hello.RPS()))
	fmt.Printf("- p99 ≤ 20 ms on (b): %v — %s\n", round(bb.p99), check(bb.p99 <= 20*time.Millisecond))
	fmt.Printf("- persistence ≥ 5,000 orders/s: %.0f — %s\n", persistRate, check(persistRate >= 5000))
	fmt.Printf("- persistence lag p99 ≤ 2 s: %v — %s\n", round(lag.P99), check(lag.P99 <= 2*time.Second))
	fmt.Printf("- api and worker < 150 MB: max %.0f MB — %s\n", float64(maxRSS)/(1<<20), check(maxRSS < 150<<20))
	fmt.Printf("- oversold 0 in every row: %d — %s\n", oversold, check(oversold == 0))
	return nil
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

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}
