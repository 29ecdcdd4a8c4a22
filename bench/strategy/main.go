// Command strategy is the order-path strategy benchmark (`make
// bench-strategy`): one run, one machine, every row driven by the same wrk
// script with rotating users at the same concurrency.
//
//	(a) a gin endpoint running one bare Lua decrement: the floor of one Redis round trip
//	(b) our order path (the api: JWT, the per-user lock elided when free, the rate limit and the accept in one script, place.lua; the tasks relayed)
//	(b′) the same taking the per-user lock for every order (ORDER_USER_LOCK_HOLD=true): two scripts an order
//	(b-3) our order path at a sale of 3 items, each order naming the next (the same api as (b))
//	(c) our order path without the per-user lock (ORDER_USER_LOCK=false)
//	(d) the seed recipe: a global per-activity SETNX lock with sleep-retry around read-check-write
//	(e) the same recipe under our fair (FIFO) lock
//	(f) fresh shoppers: our order path with every request a user never seen before, limit 1 (launch.go)
//
// plus the whole system at a launch ((f)+worker: the fresh shoppers with
// the worker persisting into MariaDB, CPU per order by process), the
// sold-out path against a gin hello endpoint, the worker's persistence
// rate into MariaDB, the persistence lag under load, and the peak resident
// memory of the api and the worker. -launch runs the launch's rows alone:
// (a), (b), (f) and (f)+worker. Results: docs/benchmarks.md.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/bench/internal/rediscost"
	"github.com/flashsale/flashsale/internal/loadtest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "each throughput run")
	flag.IntVar(&o.conns, "conns", 64, "wrk connections")
	flag.IntVar(&o.threads, "threads", 2, "wrk threads")
	flag.IntVar(&o.users, "users", 50000, "distinct users the wrk script rotates through")
	flag.IntVar(&o.repeat, "repeat", 3, "throughput runs per row, taken in rotation (a b c d e a b c d e …) so drift on a shared machine spreads evenly")
	flag.IntVar(&o.costOrders, "cost-orders", 30_000, "orders per phase of the Redis cost at saturation (bench/internal/rediscost, 64 goroutines; 0 skips it)")
	flag.BoolVar(&o.tracing, "tracing", true, "rows of the order path traced (OpenTelemetry to an OTLP sink in this process): every order sampled, and 1 in 100")
	flag.BoolVar(&o.launch, "launch", false, "only the launch's rows: the floor (a), rotating users (b), fresh shoppers (f) and the whole system (f)+worker, with CPU per order by process; no traces, sold-out or Redis cost at saturation")
	flag.BoolVar(&o.frontDoor, "front-door", false, "only the front door's rows: the sold-out path, a waiting room's poll and a gin hello, in rotation (issue 42)")
	flag.StringVar(&o.baseline, "baseline", "", "a checkout of another commit (git worktree add DIR COMMIT): its whole system runs as a row (f)+worker@base, run for run beside (f)+worker — before and after in one run")
	flag.BoolVar(&o.hooks, "hooks", true, "the whole system's rows with a webhook endpoint ((f)+worker+hook, +redis); -hooks=false leaves them out")
	flag.StringVar(&o.profile, "profile", "", "a directory: the fresh-shopper api's CPU profile (fresh-cpu.pprof) over (f)'s first run, and the whole system's api's and worker's (whole-api-cpu.pprof, whole-worker-cpu.pprof) over (f)+worker's, with their allocations (…-allocs.pprof) after, for the breakdown of their CPU (docs/benchmarks.md); those runs pay for the profiling")
	flag.IntVar(&o.freshRate, "fresh-rate", 40_000, "the most orders a second a fresh-shopper run is given users for: rate × duration tokens of new users are minted before each run, and a run that runs out fails")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "strategy:", err)
		os.Exit(1)
	}
}

type options struct {
	duration       time.Duration
	conns, threads int
	users          int
	repeat         int
	costOrders     int
	tracing        bool
	launch         bool
	frontDoor      bool
	freshRate      int
	profile        string
	baseline       string
	hooks          bool
}

// costOptions is the saturation run's: bench-rediscost's with
// REDISCOST_FLAGS="-orders N -conc 64 -items 3" (the accept at a sale of 3
// items beside the sale of one's, out of the total).
func costOptions(o options) rediscost.Options {
	return rediscost.Options{Orders: o.costOrders, Conc: 64, Items: 3}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "strategy: "+format+"\n", args...) }

// row is one strategy's figures: means over the throughput runs, the
// range of orders/s.
type row struct {
	key, name     string
	base, path    string // where wrk goes; path "" is our api's order endpoint
	ours          bool   // served by our api: its orders go to MySQL
	items         int    // the sale's items, each order naming the next in turn (our api's rows); 0: one
	runs          []float64
	rps           float64
	lo, hi        float64
	p50, p99      time.Duration
	cmdsPerOrder  float64 // commands Redis ran, inside scripts too (INFO commandstats)
	tripsPerOrder float64 // commands clients sent (MONITOR sample): round trips, pipelined or not
	redisUS       float64 // Redis main-thread CPU per order, µs (INFO cpu)
	serverUS      float64 // the serving process's CPU per order, µs (/proc/<pid>/stat)
	server        *loadtest.Proc
	fresh         bool                   // every request a user never seen before, limit 1 (launch.go)
	room          bool                   // with fresh: the sale has a waiting room, each order its admission (launch.go)
	cpu           map[string]float64     // CPU per order by process, µs (procServer, procRedis, …: launch.go)
	byCommand     map[string]commandCost // Redis's time per order by command (launch.go)
	persisted     []persistence          // the whole system's runs (launch.go)
	oversold      int64
	errors        int64
	codes         map[string]int64
}

type bench struct {
	o      options
	stack  *loadtest.Stack
	api    string // (b)
	nolock string // (c)
	srv    string // the comparison server
	tokens string
	rdb    *redis.Client
	db     *sql.DB
	ours   []int64 // activities sold through our api (their orders go to MySQL)
	// The launch's rows (launch.go): how many fresh users were minted (the
	// next is freshUser(nextUser)), the servers' processes, and the worker
	// while one runs.
	nextUser           int64
	redisPID, mysqlPID int
	hooksRedisPID      int // the deliveries' own Redis, in the rows with one (launch.go)
	worker             *loadtest.Proc
	// current is the sale the pass in progress sells (sample reads it).
	current atomic.Int64
	// freshDebug is the fresh-shopper api's DEBUG_ADDR with -profile, and
	// wholeDebug the whole system's api's and worker's in its first run
	// (by profile file prefix); profiled is set once their run was
	// profiled (profileRun).
	freshDebug string
	wholeDebug map[string]string
	profiled   bool
}

func run(ctx context.Context, o options) error {
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Log: say,
		Env: []string{"RATE_LIMIT_IP_RPS=0"}}) // per-user limit on, as by default; every client here is one IP
	if err != nil {
		return err
	}
	defer stack.Close()
	// A persistence lag tail (orders over 2 s, the report's Lag line) is
	// explained by the api's and the worker's logs: the relay's failed
	// sends, the worker's retried tasks, the reconciler's passes.
	say("processes' logs in %s (kept after the run with LOADTEST_KEEP=1)", stack.Dir)
	b, err := openBench(o, stack)
	if err != nil {
		return err
	}
	defer b.close()
	start := func(name string, env ...string) (*loadtest.Proc, error) {
		p, err := stack.StartAPI(name, env...)
		if err != nil {
			return nil, err
		}
		return p, p.WaitHTTP("http://"+p.Addr+"/readyz", time.Minute)
	}
	var freshEnv []string
	if o.profile != "" {
		// Made here: a directory not there yet failed the run at (f)'s end.
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
		if b.freshDebug, err = loadtest.FreeAddr(); err != nil {
			return err
		}
		freshEnv = append(freshEnv, "DEBUG_ADDR="+b.freshDebug)
	}
	fresh, err := start("api-fresh", freshEnv...)
	if err != nil {
		return err
	}
	var nolock, hold, traced, traced1 *loadtest.Proc
	if !o.launch {
		if nolock, err = start("api-nolock", "ORDER_USER_LOCK=false"); err != nil {
			return err
		}
		b.nolock = "http://" + nolock.Addr
		if hold, err = start("api-hold", "ORDER_USER_LOCK_HOLD=true"); err != nil {
			return err
		}
	}
	if o.tracing && !o.launch {
		sink, err := startOTLPSink()
		if err != nil {
			return err
		}
		defer sink.Close()
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.Addr().String()}
		if traced, err = stack.StartAPI("api-traced", append(env, "OTEL_TRACES_SAMPLER=always_on")...); err != nil {
			return err
		}
		if traced1, err = stack.StartAPI("api-traced-1pct", append(env, "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.01")...); err != nil {
			return err
		}
		for _, p := range []*loadtest.Proc{traced, traced1} {
			if err := p.WaitHTTP("http://"+p.Addr+"/readyz", time.Minute); err != nil {
				return err
			}
		}
		defer func() { say("OTLP sink: %d exports, %d bytes of spans", sink.requests.Load(), sink.bytes.Load()) }()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	addr, err := loadtest.FreeAddr()
	if err != nil {
		return err
	}
	srv, err := loadtest.StartProc(stack.Dir, "strategy-server", addr, self,
		[]string{"serve", "-addr", addr, "-redis", stack.RedisURL, "-jwt-secret", stack.JWTSecret}, nil)
	if err != nil {
		return err
	}
	defer srv.Stop(5 * time.Second)
	if err := srv.WaitHTTP("http://"+addr+"/hello", 30*time.Second); err != nil {
		return err
	}
	b.srv = "http://" + addr
	if o.frontDoor {
		soldOut, polls, hello, err := b.soldOutVsHello(ctx)
		if err != nil {
			return err
		}
		printFrontDoor(os.Stdout, soldOut, polls, hello)
		return nil
	}

	// The comparison rows run with no worker: nothing but the order path
	// uses the CPU. The worker comes back to drain what (b) and (c) left.
	say("stopping the worker for the comparison rows")
	stack.Workers[0].Stop(15 * time.Second)

	freshName := "fresh shoppers: our order path, every request a user never seen before, limit 1"
	rows := []*row{
		{key: "(a)", name: "bare Lua decrement (floor: one Redis round trip, no auth)", base: b.srv, server: srv, path: "/bare/%d"},
		{key: "(b)", name: "**our order path** (per-user lock elided when free, place.lua)", base: b.api, server: stack.APIs[0], ours: true},
		{key: "(f)", name: freshName, base: "http://" + fresh.Addr, server: fresh, ours: true, fresh: true},
		{key: "(f)+room", name: "fresh shoppers admitted by a waiting room: each order with its Admission-Token (issue 42)",
			base: "http://" + fresh.Addr, server: fresh, ours: true, fresh: true, room: true},
	}
	if !o.launch {
		rows = append(rows,
			&row{key: "(b-3)", name: "our order path at a sale of 3 items (each order names the next)", base: b.api, server: stack.APIs[0], ours: true, items: 3},
			&row{key: "(b′)", name: "our order path, the per-user lock taken for every order (ORDER_USER_LOCK_HOLD=true)", base: "http://" + hold.Addr, server: hold, ours: true},
			&row{key: "(c)", name: "our order path without the per-user lock", base: b.nolock, server: nolock, ours: true},
			&row{key: "(d)", name: "seed recipe: global SETNX lock, 10 ms sleep-retry, read-check-write", base: b.srv, server: srv, path: "/seed/%d/orders"},
			&row{key: "(e)", name: "seed recipe under our fair (FIFO) lock", base: b.srv, server: srv, path: "/fair/%d/orders"})
	}
	if o.tracing && !o.launch {
		rows = append(rows,
			&row{key: "(b-t)", name: "our order path, traced: every order sampled, spans exported (OTLP/HTTP)", base: "http://" + traced.Addr, server: traced, ours: true},
			&row{key: "(b-t1)", name: "our order path, traced: 1 order in 100 sampled", base: "http://" + traced1.Addr, server: traced1, ours: true})
	}
	for round := 1; round <= o.repeat; round++ {
		for _, r := range rows {
			say("%s %s: throughput run %d of %d, %v", r.key, r.name, round, o.repeat, o.duration)
			if err := b.throughput(ctx, r); err != nil {
				return fmt.Errorf("%s: %w", r.key, err)
			}
		}
	}
	for _, r := range rows {
		if err := b.sample(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", r.key, err)
		}
		if err := b.sellOut(ctx, r); err != nil {
			return fmt.Errorf("%s: %w", r.key, err)
		}
	}

	res := results{rows: rows, rss: map[string]int64{}}
	var w *loadtest.Proc
	if !o.launch {
		// Persistence rate: a worker drains the backlog (b) and (c) left.
		if res.backlog, err = b.backlog(ctx); err != nil {
			return err
		}
		say("starting a worker to persist the backlog of %d orders", res.backlog)
		started := time.Now()
		if w, err = stack.StartWorker("worker-drain"); err != nil {
			return err
		}
		if err := b.waitRecorded(ctx, 10*time.Minute); err != nil {
			return err
		}
		res.drain = time.Since(started)
		res.persistRate = float64(res.backlog) / res.drain.Seconds()
		b.worker = w

		// End to end: the order path with the worker persisting as it goes.
		e2e := &row{key: "(b)+worker", name: "our order path, worker persisting at the same time", base: b.api, server: stack.APIs[0], ours: true}
		say("%s %s: %v", e2e.key, e2e.name, o.duration)
		id, err := b.pass(ctx, e2e, 10_000_000, o.duration, e2e)
		if err != nil {
			return err
		}
		caughtUp := time.Now()
		if err := b.waitRecorded(ctx, 10*time.Minute); err != nil {
			return err
		}
		res.lagAfter = time.Since(caughtUp)
		if res.lag, err = loadtest.PersistLag(ctx, b.db, id); err != nil {
			return err
		}
		res.e2e = e2e
		if n, err := w.PeakRSS(); err == nil {
			res.rss[w.Name] = n
		}
		// Its reconciler would keep this stack's mariadbd busy auditing
		// the sales above (wholeSystem) while the whole system runs.
		w.Stop(15 * time.Second)
		b.worker = nil
	}

	// The whole system at a launch, each run on a stack of its own.
	res.whole = &row{key: "(f)+worker", name: "the whole system: " + freshName + ", a worker persisting into MariaDB",
		ours: true, fresh: true}
	// And the same with one webhook endpoint subscribed to every event
	// (issue 41), run for run beside it.
	res.hooked = &row{key: "(f)+worker+hook", name: "the whole system with one webhook endpoint subscribed to every event",
		ours: true, fresh: true}
	res.hookedOwn = &row{key: "(f)+worker+hook+redis", name: "the same, the deliveries on a Redis of their own (WEBHOOK_REDIS_URL)",
		ours: true, fresh: true}
	type wholeRun struct {
		r    *row
		root string
		hook int
	}
	runs := []wholeRun{{res.whole, root, hookNone}}
	if o.baseline != "" {
		res.baseline = &row{key: "(f)+worker@base", name: "the whole system built at " + baselineCommit(o.baseline), ours: true, fresh: true}
		runs = append(runs, wholeRun{res.baseline, o.baseline, hookNone})
	}
	if o.hooks {
		runs = append(runs, wholeRun{res.hooked, root, hookShared}, wholeRun{res.hookedOwn, root, hookOwnRedis})
	} else {
		res.hooked, res.hookedOwn = nil, nil
	}
	for round := 1; round <= o.repeat; round++ {
		for _, w := range runs {
			say("%s: run %d of %d on a stack of its own, %v, then until MySQL holds every order", w.r.key, round, o.repeat, o.duration)
			if err := wholeSystem(ctx, o, w.root, w.r, w.hook); err != nil {
				return fmt.Errorf("%s: %w", w.r.key, err)
			}
		}
	}

	// The sold-out path against a hello endpoint.
	if !o.launch {
		soldOut, polls, hello, err := b.soldOutVsHello(ctx)
		if err != nil {
			return err
		}
		res.soldOut, res.polls, res.hello = &soldOut, &polls, &hello
	}

	for _, p := range []*loadtest.Proc{stack.APIs[0], fresh, hold, nolock} {
		if p == nil {
			continue
		}
		if n, err := p.PeakRSS(); err == nil {
			res.rss[p.Name] = n
		}
	}
	// Redis's CPU per order at saturation, phase by phase, on a stack of
	// its own (this one idles meanwhile): the (b)+worker row measures it at
	// the throughput the api reaches on these cores, where Redis is far from
	// busy and its batches small; what one Redis core carries is decided
	// where it is busy (rediscost's package comment).
	if o.costOrders > 0 && !o.launch {
		say("Redis cost per order at saturation: %d orders per phase, 64 goroutines", o.costOrders)
		if res.cost, err = rediscost.Run(ctx, costOptions(o), say); err != nil {
			return fmt.Errorf("redis cost: %w", err)
		}
	}
	return b.print(ctx, res)
}

// openBench readies a bench on stack: the rotating users' tokens (none
// when o.users is 0), clients of its Redis and MySQL, and its servers'
// processes for the CPU meters; close closes the clients.
func openBench(o options, stack *loadtest.Stack) (b *bench, err error) {
	b = &bench{o: o, stack: stack, api: stack.URL}
	if b.redisPID, err = stack.RedisPID(); err != nil {
		return nil, err
	}
	if b.mysqlPID, err = stack.MySQLPID(); err != nil {
		return nil, err
	}
	if o.users > 0 {
		b.tokens = filepath.Join(stack.Dir, "tokens.txt")
		say("minting %d users' tokens", o.users)
		if err := loadtest.WriteTokens(b.tokens, stack.JWTSecret, 1, o.users, 3*time.Hour); err != nil {
			return nil, err
		}
	}
	ropt, err := redis.ParseURL(stack.RedisURL)
	if err != nil {
		return nil, err
	}
	if b.db, err = sql.Open("mysql", stack.MySQLDSN); err != nil {
		return nil, err
	}
	b.rdb = redis.NewClient(ropt)
	return b, nil
}

func (b *bench) close() {
	b.rdb.Close()
	b.db.Close()
}

// baselineCommit names the commit checked out at dir, for the report.
func baselineCommit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%h").Output()
	if err != nil {
		return dir
	}
	return strings.TrimSpace(string(out))
}
