// Command strategy is the order-path strategy benchmark (`make
// bench-strategy`): one run, one machine, every row driven by the same wrk
// script with rotating users at the same concurrency.
//
//	(a) a gin endpoint running one bare Lua decrement: the floor of one Redis round trip
//	(b) our order path (the api: JWT, the per-user lock elided when free, the rate limit and the accept in one script, place.lua; the tasks relayed)
//	(b′) the same taking the per-user lock for every order (ORDER_USER_LOCK_HOLD=true): two scripts an order
//	(c) our order path without the per-user lock (ORDER_USER_LOCK=false)
//	(d) the seed recipe: a global per-activity SETNX lock with sleep-retry around read-check-write
//	(e) the same recipe under our fair (FIFO) lock
//
// plus the sold-out path against a gin hello endpoint, the worker's
// persistence rate into MariaDB, the persistence lag under load, and the
// peak resident memory of the api and the worker. Results: docs/benchmarks.md.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/bench/internal/rediscost"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
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
}

// costOptions is the saturation run's: bench-rediscost's with
// REDISCOST_FLAGS="-orders N -conc 64".
func costOptions(o options) rediscost.Options {
	return rediscost.Options{Orders: o.costOrders, Conc: 64}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "strategy: "+format+"\n", args...) }

// row is one strategy's figures: means over the throughput runs, the
// range of orders/s.
type row struct {
	key, name     string
	base, path    string // where wrk goes; path "" is our api's order endpoint
	ours          bool   // served by our api: its orders go to MySQL
	runs          []float64
	rps           float64
	lo, hi        float64
	p50, p99      time.Duration
	cmdsPerOrder  float64 // commands Redis ran, inside scripts too (INFO commandstats)
	tripsPerOrder float64 // commands clients sent (MONITOR sample): round trips, pipelined or not
	redisUS       float64 // Redis main-thread CPU per order, µs (INFO cpu)
	serverUS      float64 // the serving process's CPU per order, µs (/proc/<pid>/stat)
	server        *loadtest.Proc
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
	// current is the sale the pass in progress sells (sample reads it).
	current atomic.Int64
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
	b := &bench{o: o, stack: stack, api: stack.URL}

	nolock, err := stack.StartAPI("api-nolock", "ORDER_USER_LOCK=false")
	if err != nil {
		return err
	}
	if err := nolock.WaitHTTP("http://"+nolock.Addr+"/readyz", time.Minute); err != nil {
		return err
	}
	b.nolock = "http://" + nolock.Addr
	hold, err := stack.StartAPI("api-hold", "ORDER_USER_LOCK_HOLD=true")
	if err != nil {
		return err
	}
	if err := hold.WaitHTTP("http://"+hold.Addr+"/readyz", time.Minute); err != nil {
		return err
	}
	var traced, traced1 *loadtest.Proc
	if o.tracing {
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

	b.tokens = filepath.Join(stack.Dir, "tokens.txt")
	say("minting %d users' tokens", o.users)
	if err := loadtest.WriteTokens(b.tokens, stack.JWTSecret, 1, o.users, 3*time.Hour); err != nil {
		return err
	}
	ropt, _ := redis.ParseURL(stack.RedisURL)
	b.rdb = redis.NewClient(ropt)
	defer b.rdb.Close()
	if b.db, err = sql.Open("mysql", stack.MySQLDSN); err != nil {
		return err
	}
	defer b.db.Close()

	// The comparison rows run with no worker: nothing but the order path
	// uses the CPU. The worker comes back to drain what (b) and (c) left.
	say("stopping the worker for the comparison rows")
	stack.Workers[0].Stop(15 * time.Second)

	rows := []*row{
		{key: "(a)", name: "bare Lua decrement (floor: one Redis round trip, no auth)", base: b.srv, server: srv, path: "/bare/%d"},
		{key: "(b)", name: "**our order path** (per-user lock elided when free, place.lua)", base: b.api, server: stack.APIs[0], ours: true},
		{key: "(b′)", name: "our order path, the per-user lock taken for every order (ORDER_USER_LOCK_HOLD=true)", base: "http://" + hold.Addr, server: hold, ours: true},
		{key: "(c)", name: "our order path without the per-user lock", base: b.nolock, server: nolock, ours: true},
		{key: "(d)", name: "seed recipe: global SETNX lock, 10 ms sleep-retry, read-check-write", base: b.srv, server: srv, path: "/seed/%d/orders"},
		{key: "(e)", name: "seed recipe under our fair (FIFO) lock", base: b.srv, server: srv, path: "/fair/%d/orders"},
	}
	if o.tracing {
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

	// Persistence rate: a worker drains the backlog (b) and (c) left.
	backlog, err := b.backlog(ctx)
	if err != nil {
		return err
	}
	say("starting a worker to persist the backlog of %d orders", backlog)
	start := time.Now()
	w, err := stack.StartWorker("worker-drain")
	if err != nil {
		return err
	}
	if err := b.waitRecorded(ctx, 10*time.Minute); err != nil {
		return err
	}
	drain := time.Since(start)
	persistRate := float64(backlog) / drain.Seconds()

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
	lagAfter := time.Since(caughtUp)
	lag, err := loadtest.PersistLag(ctx, b.db, id)
	if err != nil {
		return err
	}

	// The sold-out path against a hello endpoint.
	soldOut, hello, err := b.soldOutVsHello(ctx)
	if err != nil {
		return err
	}

	rss := map[string]int64{}
	for _, p := range []*loadtest.Proc{stack.APIs[0], hold, nolock, w} {
		if n, err := p.PeakRSS(); err == nil {
			rss[p.Name] = n
		}
	}
	// Redis's CPU per order at saturation, phase by phase, on a stack of
	// its own (this one idles meanwhile): the (b)+worker row measures it at
	// the throughput the api reaches on these cores, where Redis is far from
	// busy and its batches small; what one Redis core carries is decided
	// where it is busy (rediscost's package comment).
	var cost []rediscost.Phase
	if o.costOrders > 0 {
		say("Redis cost per order at saturation: %d orders per phase, 64 goroutines", o.costOrders)
		if cost, err = rediscost.Run(ctx, costOptions(o), say); err != nil {
			return fmt.Errorf("redis cost: %w", err)
		}
	}
	return b.print(ctx, rows, e2e, lag, lagAfter, backlog, drain, persistRate, soldOut, hello, rss, cost)
}

// pass puts a sale of stock units on for r's strategy and drives it for d;
// into (if not nil) gets the run's figures.
func (b *bench) pass(ctx context.Context, r *row, stock int, d time.Duration, into *row) (int64, error) {
	// A limit nobody reaches in a run (50,000 users × 100): these runs
	// measure accepting, not refusing.
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: stock, Limit: 100})
	if err != nil {
		return 0, err
	}
	path := ""
	if r.ours {
		b.ours = append(b.ours, id)
	} else {
		path = fmt.Sprintf(r.path, id)
	}
	b.current.Store(id)
	if r.key == "(a)" {
		b.rdb.Set(ctx, bareKey(strconv.FormatInt(id, 10)), stock, 0)
	}
	before, err := b.meter(ctx, r)
	if err != nil {
		return 0, err
	}
	res, err := b.wrk(ctx, r.base, id, path, d)
	if err != nil {
		return 0, err
	}
	after, err := b.meter(ctx, r)
	if err != nil {
		return 0, err
	}
	if into != nil {
		accepted := res.Codes["202"]
		rps := float64(accepted) / res.Seconds
		into.runs = append(into.runs, rps)
		n := float64(len(into.runs))
		into.rps = (into.rps*(n-1) + rps) / n
		into.p50 = time.Duration((float64(into.p50)*(n-1) + float64(res.P50)) / n)
		into.p99 = time.Duration((float64(into.p99)*(n-1) + float64(res.P99)) / n)
		if accepted > 0 {
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(accepted) }
			into.cmdsPerOrder = (into.cmdsPerOrder*(n-1) + float64(after.commands-before.commands)/float64(accepted)) / n
			into.redisUS = (into.redisUS*(n-1) + per(after.redis-before.redis)) / n
			into.serverUS = (into.serverUS*(n-1) + per(after.server-before.server)) / n
		}
		into.lo, into.hi = rps, rps
		for _, v := range into.runs {
			into.lo, into.hi = min(into.lo, v), max(into.hi, v)
		}
		into.errors += res.Errors
		into.codes = res.Codes
		if accepted != res.Requests {
			say("%s: not every answer was 202: %v", r.key, res.Codes)
		}
	}
	return id, nil
}

// throughput is one timed run of r, on stock that cannot run out.
func (b *bench) throughput(ctx context.Context, r *row) error {
	_, err := b.pass(ctx, r, 10_000_000, b.o.duration, r)
	return err
}

// sellOut runs r on 300 units for 5 s: how many more than 300 were sold,
// by the answers and by the stock left.
func (b *bench) sellOut(ctx context.Context, r *row) error {
	const units = 300
	say("%s: sell-out, %d units", r.key, units)
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: units, Limit: 5})
	if err != nil {
		return err
	}
	path, key := "", rediskeys.For(id).Stock
	if r.ours {
		b.ours = append(b.ours, id)
	} else {
		path = fmt.Sprintf(r.path, id)
	}
	if r.key == "(a)" {
		key = bareKey(strconv.FormatInt(id, 10))
		b.rdb.Set(ctx, key, units, 0)
	}
	res, err := b.wrk(ctx, r.base, id, path, 5*time.Second)
	if err != nil {
		return err
	}
	left, err := b.rdb.Get(ctx, key).Int64()
	if err != nil {
		return err
	}
	r.oversold = max(0, res.Codes["202"]-units, -left)
	if res.Codes["202"] != units {
		say("%s: %d of %d units sold in the sell-out run (answers %v)", r.key, res.Codes["202"], units, res.Codes)
	}
	return nil
}

func (b *bench) wrk(ctx context.Context, base string, id int64, path string, d time.Duration) (loadtest.Result, error) {
	return loadtest.RunWrk(ctx, loadtest.WrkRun{URL: base, Activity: id, TokensFile: b.tokens, Threads: b.o.threads,
		Conns: b.o.conns, Duration: d, Dir: b.stack.Dir, Path: path})
}

func (b *bench) soldOutVsHello(ctx context.Context) (soldOut, hello loadtest.Result, err error) {
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: 1, Limit: 1})
	if err != nil {
		return
	}
	b.ours = append(b.ours, id)
	// In rotation, like the rows; the best run of each (the ceiling each
	// can reach here), so one unlucky run does not decide the ratio.
	for round := 1; round <= b.o.repeat; round++ {
		say("sold-out path: one unit, then %v of refusals (run %d)", b.o.duration, round)
		so, err := b.wrk(ctx, b.api, id, "", b.o.duration)
		if err != nil {
			return soldOut, hello, err
		}
		say("gin hello: %v (run %d)", b.o.duration, round)
		he, err := b.wrk(ctx, b.srv, 0, "/hello", b.o.duration)
		if err != nil {
			return soldOut, hello, err
		}
		if so.RPS() > soldOut.RPS() {
			soldOut = so
		}
		if he.RPS() > hello.RPS() {
			hello = he
		}
	}
	return soldOut, hello, nil
}
