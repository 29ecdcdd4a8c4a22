// Command strategy is the order-path strategy benchmark (`make
// bench-strategy`): one run, one machine, every row driven by the same wrk
// script with rotating users at the same concurrency.
//
//	(a) a gin endpoint running one bare Lua decrement: the floor of one Redis round trip
//	(b) our order path (the api: JWT, rate-limit middleware, per-user lock, accept.lua, two task enqueues)
//	(c) our order path without the per-user lock (ORDER_USER_LOCK=false)
//	(d) the seed recipe: a global per-activity SETNX lock with sleep-retry around read-check-write
//	(e) the same recipe under our fair (FIFO) lock
//
// plus the sold-out path against a gin hello endpoint, the worker's
// persistence rate into MariaDB, the persistence lag under load, and the
// peak resident memory of the api and the worker. Results: docs/benchmarks.md.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

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
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "strategy: "+format+"\n", args...) }

// row is one strategy's figures.
type row struct {
	key, name     string
	rps           float64
	p50, p99      time.Duration
	cmdsPerOrder  float64 // commands Redis ran, inside scripts too (INFO commandstats)
	tripsPerOrder float64 // commands clients sent (MONITOR sample): round trips, pipelined or not
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
}

func run(ctx context.Context, o options) error {
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Log: say,
		Env: []string{"RATE_LIMIT_USER_RPS=0", "RATE_LIMIT_IP_RPS=0"}})
	if err != nil {
		return err
	}
	defer stack.Close()
	b := &bench{o: o, stack: stack, api: stack.URL}

	nolock, err := stack.StartAPI("api-nolock", "ORDER_USER_LOCK=false")
	if err != nil {
		return err
	}
	if err := nolock.WaitHTTP("http://"+nolock.Addr+"/readyz", time.Minute); err != nil {
		return err
	}
	b.nolock = "http://" + nolock.Addr
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
		{key: "(a)", name: "bare Lua decrement (floor: one Redis round trip, no auth)"},
		{key: "(b)", name: "**our order path** (per-user lock + accept.lua + 2 enqueues)"},
		{key: "(c)", name: "our order path without the per-user lock"},
		{key: "(d)", name: "seed recipe: global SETNX lock, 10 ms sleep-retry, read-check-write"},
		{key: "(e)", name: "seed recipe under our fair (FIFO) lock"},
	}
	for _, r := range rows {
		if err := b.measure(ctx, r); err != nil {
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
	e2e := &row{key: "(b)+worker", name: "our order path, worker persisting at the same time"}
	id, err := b.measureOurs(ctx, e2e, b.api)
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
	for _, p := range []*loadtest.Proc{stack.APIs[0], nolock, w} {
		if n, err := p.PeakRSS(); err == nil {
			rss[p.Name] = n
		}
	}
	return b.print(ctx, rows, e2e, lag, lagAfter, backlog, drain, persistRate, soldOut, hello, rss)
}

// measure runs a row's throughput pass (stock that cannot run out) and its
// sell-out pass (300 units, oversell counted from the answers).
func (b *bench) measure(ctx context.Context, r *row) error {
	switch r.key {
	case "(b)":
		_, err := b.measureOurs(ctx, r, b.api)
		return err
	case "(c)":
		_, err := b.measureOurs(ctx, r, b.nolock)
		return err
	}
	path := map[string]string{"(a)": "/bare/%d", "(d)": "/seed/%d/orders", "(e)": "/fair/%d/orders"}[r.key]
	pass := func(stock int, d time.Duration) (loadtest.Result, int64, error) {
		id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: stock, Limit: 5})
		if err != nil {
			return loadtest.Result{}, 0, err
		}
		if r.key == "(a)" {
			b.rdb.Set(ctx, bareKey(strconv.FormatInt(id, 10)), stock, 0)
		}
		res, err := b.wrk(ctx, b.srv, id, fmt.Sprintf(path, id), d)
		return res, id, err
	}
	return b.fill(ctx, r, pass)
}

// measureOurs is measure for a row served by our api at base; it returns
// the throughput pass's activity.
func (b *bench) measureOurs(ctx context.Context, r *row, base string) (int64, error) {
	var first int64
	pass := func(stock int, d time.Duration) (loadtest.Result, int64, error) {
		id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: stock, Limit: 5})
		if err != nil {
			return loadtest.Result{}, 0, err
		}
		b.ours = append(b.ours, id)
		if first == 0 {
			first = id
		}
		res, err := b.wrk(ctx, base, id, "", d)
		return res, id, err
	}
	return first, b.fill(ctx, r, pass)
}

// fill runs the two passes of a row.
func (b *bench) fill(ctx context.Context, r *row, pass func(stock int, d time.Duration) (loadtest.Result, int64, error)) error {
	say("%s %s: throughput, %v", r.key, r.name, b.o.duration)
	before, err := commandCalls(ctx, b.rdb)
	if err != nil {
		return err
	}
	// Halfway through, a one-second MONITOR sample tells commands clients
	// sent from those scripts ran; one marker command per accepted order.
	marker := map[string]string{"(a)": `"DECR"`, "(d)": `"HSET" "fs:{act:`, "(e)": `"HSET" "fs:{act:`}[r.key]
	if marker == "" {
		marker = `"XADD"` // accept.lua appends each order to the outbox
	}
	sample := make(chan [2]int, 1)
	go func() {
		time.Sleep(b.o.duration / 2)
		sent, orders, err := monitorSample(ctx, b.rdb.Options().Addr, time.Second, marker)
		if err != nil {
			say("%s: MONITOR sample: %v", r.key, err)
		}
		sample <- [2]int{sent, orders}
	}()
	res, _, err := pass(10_000_000, b.o.duration)
	if err != nil {
		return err
	}
	if smp := <-sample; smp[1] > 0 {
		r.tripsPerOrder = float64(smp[0]) / float64(smp[1])
	}
	after, err := commandCalls(ctx, b.rdb)
	if err != nil {
		return err
	}
	accepted := res.Codes["202"]
	r.rps, r.p50, r.p99, r.errors, r.codes = float64(accepted)/res.Seconds, res.P50, res.P99, res.Errors, res.Codes
	if accepted > 0 {
		r.cmdsPerOrder = float64(after-before) / float64(accepted)
	}
	const sellOut = 300
	say("%s: sell-out, %d units", r.key, sellOut)
	res, id, err := pass(sellOut, 5*time.Second)
	if err != nil {
		return err
	}
	r.oversold = max(0, res.Codes["202"]-sellOut)
	left, err := b.rdb.Get(ctx, rediskeys.For(id).Stock).Int64()
	if r.key == "(a)" {
		left, err = b.rdb.Get(ctx, bareKey(strconv.FormatInt(id, 10))).Int64()
	}
	if err != nil {
		return err
	}
	if left < 0 {
		r.oversold = max(r.oversold, -left)
	}
	if res.Codes["202"] != sellOut {
		say("%s: %d of %d units sold in the sell-out pass (answers %v)", r.key, res.Codes["202"], sellOut, res.Codes)
	}
	return nil
}

func (b *bench) wrk(ctx context.Context, base string, id int64, path string, d time.Duration) (loadtest.Result, error) {
	return loadtest.RunWrk(ctx, loadtest.WrkRun{URL: base, Activity: id, TokensFile: b.tokens, Threads: b.o.threads,
		Conns: b.o.conns, Duration: d, Dir: b.stack.Dir, Path: path})
}

// backlog is how many orders our api accepted that MySQL does not hold yet.
func (b *bench) backlog(ctx context.Context) (int64, error) {
	accepted, err := b.accepted(ctx)
	if err != nil {
		return 0, err
	}
	var recorded int64
	err = b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&recorded)
	return accepted - recorded, err
}

func (b *bench) accepted(ctx context.Context) (int64, error) {
	var n int64
	for _, id := range b.ours {
		a, err := b.rdb.HGet(ctx, rediskeys.For(id).Meta, "accepted").Int64()
		if err != nil {
			return 0, err
		}
		n += a
	}
	return n, nil
}

// waitRecorded waits until MySQL holds every order our api accepted.
func (b *bench) waitRecorded(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := b.backlog(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d orders still not in MySQL after %v", n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) soldOutVsHello(ctx context.Context) (soldOut, hello loadtest.Result, err error) {
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: 1, Limit: 1})
	if err != nil {
		return
	}
	b.ours = append(b.ours, id)
	say("sold-out path: one unit, then %v of refusals", b.o.duration)
	if soldOut, err = b.wrk(ctx, b.api, id, "", b.o.duration); err != nil {
		return
	}
	say("gin hello: %v", b.o.duration)
	hello, err = b.wrk(ctx, b.srv, 0, "/hello", b.o.duration)
	return
}

// monitorSample watches Redis with MONITOR for d: how many commands clients
// sent (not those scripts ran: MONITOR marks those "[n lua]"), and how many
// lines contain marker (one per order). MONITOR slows Redis while it runs,
// which is why it is only a sample.
func monitorSample(ctx context.Context, addr string, d time.Duration, marker string) (sent, orders int, err error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		return 0, 0, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(d))
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// Each line is a RESP simple string: "+1700000000.123456 [0 127.0.0.1:5555] "EVALSHA" …",
		// "[0 lua]" for a command a script ran; the first is MONITOR's own "+OK".
		line := strings.TrimPrefix(sc.Text(), "+")
		if line == "OK" {
			continue
		}
		if strings.Contains(strings.ToLower(line), strings.ToLower(marker)) { // go-redis sends lower case
			orders++
		}
		if !strings.Contains(line, " lua] ") {
			sent++
		}
	}
	return sent, orders, nil
}

// commandCalls is how many commands Redis has run (INFO commandstats).
func commandCalls(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		total += n
	}
	return total, nil
}

func (b *bench) print(ctx context.Context, rows []*row, e2e *row, lag loadtest.Lag, lagAfter time.Duration, backlog int64,
	drain time.Duration, persistRate float64, soldOut, hello loadtest.Result, rss map[string]int64) error {
	redisInfo, _ := b.rdb.Info(ctx, "server").Result()
	var mariadb string
	_ = b.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&mariadb)
	fmt.Printf("### Strategy benchmark, %s\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("Machine: %s, %d CPUs; redis %s; MariaDB %s; %s. Command: `make bench-strategy` "+
		"(wrk -t%d -c%d, %v per throughput run, %d users rotating; every process on this one machine).\n\n",
		cpuModel(), runtime.NumCPU(), field(redisInfo, "redis_version"), mariadb, runtime.Version(), b.o.threads, b.o.conns, b.o.duration, b.o.users)
	fmt.Println("| row | strategy | orders/s | p50 | p99 | Redis commands/order: sent / run | oversold |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	byKey := map[string]*row{}
	for _, r := range append(rows, e2e) {
		byKey[r.key] = r
		fmt.Printf("| %s | %s | %.0f | %v | %v | %.1f / %.1f | %d |\n", r.key, r.name, r.rps, round(r.p50), round(r.p99), r.tripsPerOrder, r.cmdsPerOrder, r.oversold)
	}
	fmt.Println()
	fmt.Printf("- Sold-out path (our api, 409 SOLD_OUT): %.0f answers/s, p99 %v; gin hello: %.0f/s, p99 %v (%.0f%% of hello).\n",
		soldOut.RPS(), round(soldOut.P99), hello.RPS(), round(hello.P99), 100*soldOut.RPS()/hello.RPS())
	fmt.Printf("- Worker persistence into MariaDB: a backlog of %d orders written in %v = %.0f orders/s (one worker, WORKER_CONCURRENCY 64).\n",
		backlog, drain.Round(10*time.Millisecond), persistRate)
	fmt.Printf("- Persistence lag with the worker running during (b)+worker (%.0f orders/s accepted): p50 %v, p99 %v, max %v over %d orders; MySQL caught up %v after the load ended.\n",
		e2e.rps, round(lag.P50), round(lag.P99), round(lag.Max), lag.N, lagAfter.Round(10*time.Millisecond))
	names := []string{}
	for n, v := range rss {
		names = append(names, fmt.Sprintf("%s %.0f MB", n, float64(v)/(1<<20)))
	}
	fmt.Printf("- Peak resident memory (VmHWM): %s.\n", strings.Join(names, ", "))
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
	fmt.Printf("- sold-out ≥ 80%% of hello: %.0f%% — %s\n", 100*soldOut.RPS()/hello.RPS(), check(soldOut.RPS() >= 0.8*hello.RPS()))
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
