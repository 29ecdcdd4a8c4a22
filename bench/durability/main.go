// Command durability measures what durability costs on the order path
// (`make bench-durability`), side by side in one run on one machine:
//
//	(1) one redis-server, appendfsync everysec (docker-compose's default before Sentinel)
//	(2) one redis-server, appendfsync always
//	(3) a primary, a replica and three sentinels, REDIS_ACK_REPLICAS=0
//	(4) the same, REDIS_ACK_REPLICAS=1 (a change is answered once the replica has it)
//
// Each row is our api (defaults but the per-IP limit, every client here
// being 127.0.0.1), no worker, a 10,000,000-unit sale, wrk -t2 -c64 with
// 50,000 users rotating; runs are taken in rotation (1 2 3 4 1 2 3 4 …) so
// drift on a shared machine spreads evenly. Results: docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

type row struct {
	name   string
	stack  *loadtest.Stack
	url    string
	sale   int64
	tokens string
	runs   []loadtest.Result
}

func main() {
	d := flag.Duration("duration", 15*time.Second, "each throughput run")
	repeat := flag.Int("repeat", 3, "runs per row, in rotation")
	users := flag.Int("users", 50000, "distinct users wrk rotates through")
	replicaNice := flag.Int("replica-nice", 0, "renice the replica of rows (3) and (4) to this niceness (e.g. -10): "+
		"shows how much of (4)'s p99 is the replica waiting for a core that the api, wrk and the primary keep busy")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *d, *repeat, *users, *replicaNice); err != nil {
		fmt.Fprintln(os.Stderr, "durability:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "durability: "+format+"\n", args...) }

func run(ctx context.Context, d time.Duration, repeat, users, replicaNice int) error {
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	env := []string{"RATE_LIMIT_IP_RPS=0"}
	start := func(o loadtest.StackOptions) (*loadtest.Stack, error) {
		o.APIs, o.Workers, o.Log, o.Env = 1, 0, say, env
		return loadtest.StartStack(ctx, root, o)
	}
	everysec, err := start(loadtest.StackOptions{RedisFsync: "everysec"})
	if err != nil {
		return err
	}
	defer everysec.Close()
	always, err := start(loadtest.StackOptions{RedisFsync: "always"})
	if err != nil {
		return err
	}
	defer always.Close()
	sentinel, err := start(loadtest.StackOptions{Sentinel: true})
	if err != nil {
		return err
	}
	defer sentinel.Close()
	if replicaNice != 0 {
		pids, err := sentinel.ReplicaPIDs(ctx)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, pid, replicaNice); err != nil {
				return fmt.Errorf("renice the replica (pid %d) to %d: %w", pid, replicaNice, err)
			}
			say("the replica (pid %d) reniced to %d", pid, replicaNice)
		}
	}
	ack0, err := sentinel.StartAPI("api-ack0", "REDIS_ACK_REPLICAS=0")
	if err != nil {
		return err
	}
	if err := ack0.WaitHTTP("http://"+ack0.Addr+"/readyz", time.Minute); err != nil {
		return err
	}
	rows := []*row{
		{name: "(1) one redis-server, appendfsync everysec", stack: everysec, url: everysec.URL},
		{name: "(2) one redis-server, appendfsync always", stack: always, url: always.URL},
		{name: "(3) primary + replica + 3 sentinels, REDIS_ACK_REPLICAS=0", stack: sentinel, url: "http://" + ack0.Addr},
		{name: "(4) primary + replica + 3 sentinels, REDIS_ACK_REPLICAS=1", stack: sentinel, url: sentinel.URL},
	}
	for _, r := range rows {
		if r.sale, err = loadtest.CreateSale(ctx, r.url, r.stack.AdminToken, loadtest.Sale{Stock: 10_000_000, Limit: 10_000}); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		r.tokens = filepath.Join(r.stack.Dir, fmt.Sprintf("tokens-%d.txt", r.sale))
		say("%s: minting %d users' tokens", r.name, users)
		if err := loadtest.WriteTokens(r.tokens, r.stack.JWTSecret, 1, users, 3*time.Hour); err != nil {
			return err
		}
	}
	for round := 1; round <= repeat; round++ {
		for _, r := range rows {
			say("%s: run %d of %d, %v", r.name, round, repeat, d)
			res, err := loadtest.RunWrk(ctx, loadtest.WrkRun{URL: r.url, Activity: r.sale, TokensFile: r.tokens, Threads: 2,
				Conns: 64, Duration: d, Dir: r.stack.Dir})
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			r.runs = append(r.runs, res)
		}
	}
	fmt.Printf("Durability on the order path: %d × %v per row in rotation, wrk -t2 -c64, %d users; %d CPUs, %s\n",
		repeat, d, users, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	if replicaNice != 0 {
		fmt.Printf("The replica of rows (3) and (4) ran at niceness %d.\n", replicaNice)
	}
	fmt.Println()
	fmt.Println("| row | orders/s (mean; range) | p50 | p99 | answers other than 202 |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, r := range rows {
		var sum, lo, hi float64
		var p50, p99 time.Duration
		other := map[string]int64{}
		for i, res := range r.runs {
			rps := float64(res.Codes["202"]) / res.Seconds
			sum += rps
			if i == 0 || rps < lo {
				lo = rps
			}
			hi = max(hi, rps)
			p50 += res.P50 / time.Duration(len(r.runs))
			p99 += res.P99 / time.Duration(len(r.runs))
			for k, v := range res.Codes {
				if k != "202" {
					other[k] += v
				}
			}
		}
		fmt.Printf("| %s | %.0f (%.0f–%.0f) | %v | %v | %v |\n", r.name, sum/float64(len(r.runs)), lo, hi,
			p50.Round(10*time.Microsecond), p99.Round(100*time.Microsecond), other)
	}
	return nil
}
