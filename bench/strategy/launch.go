package main

// The launch's rows (issue 43): every shopper new, and the whole system on
// the box. A launch is not the rotating crowd of (b), where each of 50,000
// users orders again and again, their JWTs cached by the api and their
// fields in Redis already there: at a launch every request is a shopper
// never seen before who buys once, and the worker persists into MariaDB on
// the same cores meanwhile. So:
//
//	(f)         fresh shoppers: every request a user never seen before (its
//	            token minted before the run and never sent before; their ids
//	            spread as a real shop's users' are: freshUser), limit 1;
//	            no worker, in the rotation with (a) and (b), on an api of its
//	            own (api-fresh): (b)'s api keeps its 50,000 rotating users'
//	            tokens cached (JWT_CACHE_SIZE, 131,072), and fresh tokens
//	            through it would evict them, starting every (b) run cold
//	(f)+room    the same shoppers in a sale with a waiting room (issue 42),
//	            each order with its Admission-Token (minted with the user's
//	            token: shoppers the room has let in, without the room's own
//	            traffic), on (f)'s api, in the rotation: what checking an
//	            admission costs an order
//	(f)+worker  the whole system: the same load with a worker persisting into
//	            MariaDB, on a stack of its own for each run (wholeSystem says
//	            why); its CPU is counted from the load's start until MySQL
//	            holds every order the load accepted (an order's cost is all
//	            of it), and how far persistence fell behind is reported
//
// Every row reports CPU per accepted order by process, from
// /proc/<pid>/stat (all threads): the serving process, redis-server, the
// worker and mariadbd, and wrk's own apart.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
)

// The processes whose CPU the rows report, by name.
const (
	procServer  = "api"     // the row's serving process: our api, or the comparison server for (a)
	procRedis   = "redis"   // redis-server, every thread (the main thread alone is reading.redis)
	procWorker  = "worker"  // the worker, while one runs
	procMariaDB = "mariadb" // mariadbd
	procWrk     = "wrk"     // the load generator: reported apart, never in a total
	// procHooksRedis is the webhook deliveries' own redis-server
	// (WEBHOOK_REDIS_URL), in the rows that have one: in the total, not in
	// the Redis column, which is the sales' Redis.
	procHooksRedis = "redis-hooks"
)

// The whole system's webhook variants (wholeSystem's hook).
const (
	hookNone     = iota // no endpoint
	hookShared          // one endpoint, the deliveries' tasks on the sales' Redis
	hookOwnRedis        // one endpoint, the deliveries on a Redis of their own
)

// serviceProcs are the processes a row's total counts: the service's.
var serviceProcs = []string{procServer, procRedis, procWorker, procMariaDB}

// freshUsersFrom is the least user id the fresh passes mint: far above the
// rotating users (1 to -users). Each pass takes the next shoppers
// (freshUser), so no user is sent twice in a bench run.
const freshUsersFrom = 1_000_000_000

// freshUser is the k-th fresh shopper of a bench run (k from 0). A real
// shop's users signed up over years and a launch's shoppers are any of
// them, so their ids are not numbered in the order they come, as the
// passes' were until 2026-11-30: then every order's row went at the end of
// orders' key by user (orders_user), which an A/B priced at 1.9 µs an
// order of MariaDB (docs/benchmarks.md). So the ids are spread over a
// billion: freshUsersFrom + (k·2654435761 mod 2^30), an odd multiplier
// modulo a power of two, one-to-one on [0, 2^30), so each k is its own
// user; below 2^31 still.
func freshUser(k int64) int64 { return freshUsersFrom + (k*2654435761)&(1<<30-1) }

// users is whom a wrk run sends: the rotating users, or a fresh pass's
// users, each once (loadtest.WrkRun.Once).
type users struct {
	file string
	once bool
}

// freshUsers mints tokens of users never sent before, enough for d at
// -fresh-rate orders a second, one file per wrk thread, with their
// admissions to sale room when it is not 0; before the pass, so minting is
// not measured. remove deletes the files.
func (b *bench) freshUsers(d time.Duration, room int64) (u users, remove func(), err error) {
	n := int(float64(b.o.freshRate)*d.Seconds()) + b.o.conns
	from := b.nextUser
	b.nextUser += int64(n)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = freshUser(from + int64(i))
	}
	file := filepath.Join(b.stack.Dir, "fresh-"+strconv.FormatInt(from, 10))
	remove = func() {
		for i := range b.o.threads {
			_ = os.Remove(file + "." + strconv.Itoa(i))
		}
	}
	if err := loadtest.WriteUserTokenFiles(file, b.stack.JWTSecret, ids, b.o.threads, 3*time.Hour, room); err != nil {
		remove()
		return users{}, nil, err
	}
	return users{file: file, once: true}, remove, nil
}

// readProcs adds the shared processes' CPU so far to m: redis-server,
// mariadbd, and the worker while one runs (the serving process is the
// row's, m.server).
func (b *bench) readProcs(m *reading) error {
	pids := map[string]int{procRedis: b.redisPID, procMariaDB: b.mysqlPID}
	if b.hooksRedisPID != 0 {
		pids[procHooksRedis] = b.hooksRedisPID
	}
	if b.worker != nil {
		pids[procWorker] = b.worker.PID()
	}
	m.procs = map[string]time.Duration{}
	for name, pid := range pids {
		t, err := loadtest.ProcessCPU(pid)
		if err != nil {
			return fmt.Errorf("%s's CPU: %w", name, err)
		}
		m.procs[name] = t
	}
	return nil
}

// addCPU folds one run's CPU per accepted order, process by process, into
// r's means over its n runs so far (this one included).
func (r *row) addCPU(before, after reading, wrk time.Duration, accepted int64, n int) {
	if r.cpu == nil {
		r.cpu = map[string]float64{}
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(accepted) }
	this := map[string]float64{procServer: per(after.server - before.server), procWrk: per(wrk)}
	for name, t := range after.procs {
		if t0, ok := before.procs[name]; ok {
			this[name] = per(t - t0)
		}
	}
	for name, v := range this {
		r.cpu[name] = (r.cpu[name]*float64(n-1) + v) / float64(n)
	}
	if r.byCommand == nil {
		r.byCommand = map[string]commandCost{}
	}
	for name, st := range after.byCommand {
		st0 := before.byCommand[name]
		c := r.byCommand[name]
		c.calls = (c.calls*float64(n-1) + float64(st.Calls-st0.Calls)/float64(accepted)) / float64(n)
		c.us = (c.us*float64(n-1) + float64(st.Usec-st0.Usec)/float64(accepted)) / float64(n)
		r.byCommand[name] = c
	}
}

// commandCost is what one Redis command cost a row per accepted order
// (INFO commandstats, means over its runs): calls, and µs of Redis's time
// in them (a script's µs include the commands it ran, which are listed
// again under their own names).
type commandCost struct{ calls, us float64 }

// printByCommand writes, for the launch's rows of our api, Redis's time
// per accepted order by command: where the Redis column's µs go.
func printByCommand(w io.Writer, rows []*row) {
	var shown []*row
	names := map[string]float64{}
	for _, r := range rows {
		if !r.ours || len(r.byCommand) == 0 {
			continue
		}
		shown = append(shown, r)
		for name, c := range r.byCommand {
			names[name] = max(names[name], c.us)
		}
	}
	if len(shown) == 0 {
		return
	}
	order := make([]string, 0, len(names))
	for name, us := range names {
		if us >= 0.05 {
			order = append(order, name)
		}
	}
	sort.Slice(order, func(i, j int) bool { return names[order[i]] > names[order[j]] })
	fmt.Fprintf(w, "\nRedis by command, per accepted order (INFO commandstats; µs of Redis's time, calls in brackets; "+
		"a script's µs include the commands it ran, listed again under their own names; commands under 0.05 µs left out):\n\n")
	head, rule := "| command |", "|---|"
	for _, r := range shown {
		head += " " + r.key + " |"
		rule += "---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, name := range order {
		line := "| " + name + " |"
		for _, r := range shown {
			c := r.byCommand[name]
			line += fmt.Sprintf(" %.2f (%.2f) |", c.us, c.calls)
		}
		fmt.Fprintln(w, line)
	}
}

// total is r's service CPU per accepted order, µs: every process but wrk.
func (r *row) total() float64 {
	t := r.cpu[procHooksRedis]
	for _, name := range serviceProcs {
		t += r.cpu[name]
	}
	return t
}

// persistence is how one whole-system run's persistence went.
type persistence struct {
	outbox   int64         // orders the load accepted that MySQL did not hold when it ended (the outbox)
	oldest   time.Duration // how long the oldest of them had waited then
	caughtUp time.Duration // from the load's end until MySQL held every order
	lag      loadtest.Lag  // acceptance to row, every order of the run
	// quiet is how long mariadbd took to go quiet before the load.
	quiet time.Duration
	// idle is what each process used a second in the seconds after MySQL
	// held every order (not counted in the run): mostly the reconciler.
	idle map[string]time.Duration
	// delivered, with an endpoint, is when its receiver had every
	// order's order.accepted, from the load's end (within the window).
	delivered time.Duration
}

// hookReceiver is the endpoint of the hooked whole-system row: it answers
// 204 to every delivery and counts the distinct order.accepted ids.
type hookReceiver struct {
	srv  *http.Server
	mu   sync.Mutex
	seen map[string]bool
}

// startHookReceiver serves a receiver on a free loopback port and
// subscribes it to every event through stack's admin API.
func startHookReceiver(ctx context.Context, stack *loadtest.Stack) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{seen: map[string]bool{}}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if bytes.Contains(body[:min(len(body), 40)], []byte(`"order.accepted"`)) {
			h.mu.Lock()
			h.seen[req.Header.Get("webhook-id")] = true
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	body := fmt.Sprintf(`{"url":"http://%s/hooks","events":["*"],"description":"the strategy bench's receiver"}`, ln.Addr())
	req, _ := http.NewRequestWithContext(ctx, "POST", stack.URL+"/admin/v1/webhook-endpoints", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+stack.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.close()
		return nil, err
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		h.close()
		return nil, fmt.Errorf("create the bench's webhook endpoint: %d %s", resp.StatusCode, raw)
	}
	return h, nil
}

func (h *hookReceiver) count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.seen))
}

func (h *hookReceiver) close() { _ = h.srv.Close() }

// wholeSystem runs r, the whole system, once, on a stack of its own
// started for the run (one api, one worker, redis-server, mariadbd, as
// `make run` has them): a fresh-shopper pass with the worker persisting,
// and its CPU counted until MySQL holds every order the pass accepted.
//
// Why a stack of its own: mariadbd works for the worker for as long as a
// sale is live (published or closed, and for a day after its last
// change: mysqlstore.Activities.LiveIDs), not only while orders arrive.
// Every 2 s the reconciler audits each live sale (admin.Service.Sample),
// counting and summing its orders in MySQL, about 1 µs of mariadbd a row:
// after the rows before it had left 1.26 million orders in 20 live sales,
// mariadbd used 380-450 ms a second with nothing arriving, and a first
// version of this row, on the bench's own stack, counted that into the
// launch (MariaDB 55 µs an order where the issue measured 27, and 244
// when the window waited for mariadbd to go quiet, which it never did).
// A launch's own sale is audited too, and counted: it is part of what a
// launch costs.
//
// The wait for MySQL polls the sale's outbox in Redis (an order leaves it
// once its row is written, docs/orders.md), not MySQL: a COUNT(*) of the
// orders every 20 ms would itself keep mariadbd busy in the window.
// mariadbd's background flushing after the window is not counted.
//
// With hook (hookShared, hookOwnRedis), one webhook endpoint is subscribed
// to every event (issue 41: the order path's throughput with one within
// 10% of none): a receiver in this process answers 204 (its CPU is the
// shop's, not counted), and the window lasts until it has every order's
// order.accepted too. With hookOwnRedis the deliveries' tasks go to a
// redis-server of their own (WEBHOOK_REDIS_URL), counted apart.
func wholeSystem(ctx context.Context, o options, root string, r *row, hook int) error {
	env := []string{"RATE_LIMIT_IP_RPS=0"}
	if hook != hookNone {
		env = append(env, "WEBHOOK_ALLOW_PRIVATE=true")
	}
	var hooksRedis *loadtest.Proc
	if hook == hookOwnRedis {
		dir, err := os.MkdirTemp("", "bench-hooks-redis")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		addr, err := loadtest.FreeAddr()
		if err != nil {
			return err
		}
		_, port, _ := strings.Cut(addr, ":")
		hooksRedis, err = loadtest.StartProc(dir, "redis-hooks", addr, "redis-server",
			[]string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir}, nil)
		if err != nil {
			return err
		}
		defer hooksRedis.Stop(5 * time.Second)
		env = append(env, "WEBHOOK_REDIS_URL=redis://"+addr+"/0")
	}
	so := loadtest.StackOptions{APIs: 1, Workers: 1, Log: say, Env: env}
	var debug map[string]string
	if o.profile != "" && r.key == "(f)+worker" && len(r.runs) == 0 { // its first run: profileRun
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
		debug = map[string]string{}
		for _, name := range []string{"whole-api", "whole-worker"} {
			addr, err := loadtest.FreeAddr()
			if err != nil {
				return err
			}
			debug[name] = addr
		}
		so.APIEnv = []string{"DEBUG_ADDR=" + debug["whole-api"]}
		so.WorkerEnv = []string{"DEBUG_ADDR=" + debug["whole-worker"]}
	}
	stack, err := loadtest.StartStack(ctx, root, so)
	if err != nil {
		return err
	}
	defer stack.Close()
	var rcv *hookReceiver
	if hook != hookNone {
		if rcv, err = startHookReceiver(ctx, stack); err != nil {
			return err
		}
		defer rcv.close()
	}
	o.users = 0 // fresh users alone
	b, err := openBench(o, stack)
	if err != nil {
		return err
	}
	defer b.close()
	b.wholeDebug = debug
	b.worker = stack.Workers[0]
	if hooksRedis != nil {
		b.hooksRedisPID = hooksRedis.PID()
	}
	r.server, r.base = stack.APIs[0], stack.URL

	var p persistence
	if p.quiet, err = b.quietMariaDB(ctx, time.Minute); err != nil {
		return err
	}
	id, err := b.passThen(ctx, r, 10_000_000, o.duration, r, func(id int64) error {
		ended := time.Now()
		live, err := stock.New(b.rdb, stock.Config{}).Read(ctx, id)
		if err != nil {
			return err
		}
		p.outbox = live.Unrecorded
		if !live.OldestUnrecorded.IsZero() {
			p.oldest = ended.Sub(live.OldestUnrecorded)
		}
		outbox := rediskeys.For(id).Outbox // the sale's one shard
		for n := live.Unrecorded; n > 0; {
			if time.Since(ended) > 10*time.Minute {
				return fmt.Errorf("%d orders still not in MySQL after 10 minutes", n)
			}
			time.Sleep(20 * time.Millisecond)
			if n, err = b.rdb.ZCard(ctx, outbox).Result(); err != nil {
				return err
			}
		}
		p.caughtUp = time.Since(ended)
		if rcv != nil {
			final, err := stock.New(b.rdb, stock.Config{}).Read(ctx, id)
			if err != nil {
				return err
			}
			for rcv.count() < final.Accepted {
				if time.Since(ended) > 10*time.Minute {
					return fmt.Errorf("the receiver has %d of %d orders' events after 10 minutes", rcv.count(), final.Accepted)
				}
				time.Sleep(20 * time.Millisecond)
			}
			p.delivered = time.Since(ended)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Outside the window: MySQL's own word that it holds every order, the
	// lag, and what the system uses once nothing arrives.
	if err := b.waitRecorded(ctx, time.Minute); err != nil {
		return err
	}
	if p.lag, err = loadtest.PersistLag(ctx, b.db, id); err != nil {
		return err
	}
	if p.idle, err = b.idleRates(ctx, r, 5*time.Second); err != nil {
		return err
	}
	r.persisted = append(r.persisted, p)
	return nil
}

// mariadbQuiet is how little CPU mariadbd uses idle, by its background
// threads' timers: under 20 ms in a second (2% of a core), where a
// flushing one uses a good part of a core.
const mariadbQuiet = 20 * time.Millisecond

// quietMariaDB waits until mariadbd has used under mariadbQuiet in the last
// second, at most max (then it goes on, and says so): how long it waited.
func (b *bench) quietMariaDB(ctx context.Context, max time.Duration) (time.Duration, error) {
	start := time.Now()
	last, err := loadtest.ProcessCPU(b.mysqlPID)
	if err != nil {
		return 0, err
	}
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		now, err := loadtest.ProcessCPU(b.mysqlPID)
		if err != nil {
			return 0, err
		}
		waited := time.Since(start)
		if now-last < mariadbQuiet {
			return waited, nil
		}
		if waited >= max {
			say("mariadbd still used %v in a second after %v: going on", now-last, waited.Round(time.Second))
			return waited, nil
		}
		last = now
	}
}

// idleRates is what each of r's processes uses a second over d with no
// load.
func (b *bench) idleRates(ctx context.Context, r *row, d time.Duration) (map[string]time.Duration, error) {
	before, err := b.meter(ctx, r)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := b.meter(ctx, r)
	if err != nil {
		return nil, err
	}
	rate := func(t time.Duration) time.Duration { return time.Duration(float64(t) / d.Seconds()) }
	out := map[string]time.Duration{procServer: rate(after.server - before.server)}
	for name, t := range after.procs {
		out[name] = rate(t - before.procs[name])
	}
	return out, nil
}

// printLaunch writes the launch's table: CPU per accepted order by process
// for the floor, rotating users, fresh shoppers and the whole system.
func printLaunch(w io.Writer, o options, rows []*row) {
	fmt.Fprintf(w, "Launch: CPU per accepted order by process, µs (/proc/<pid>/stat, every thread; means over the runs; "+
		"(a)'s api is the comparison server). (f) and (f)+worker: every request a user never seen before, limit 1; "+
		"(f)+worker on a stack of its own each run, counted until MySQL holds every order. wrk's own CPU apart, in no total.\n\n")
	fmt.Fprintln(w, "| row | accepted orders/s (mean; range) | p99 | api | Redis (main thread) | worker | MariaDB | **total** | wrk, apart |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	cell := func(r *row, name string) string {
		v, ok := r.cpu[name]
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.1f", v)
	}
	var floor *row
	for _, r := range rows {
		if r.key == "(a)" {
			floor = r
		}
		spread := ""
		if len(r.runs) > 1 {
			spread = fmt.Sprintf(" (%.0f–%.0f)", r.lo, r.hi)
		}
		fmt.Fprintf(w, "| %s %s | %.0f%s | %v | %s | %s (%.1f) | %s | %s | **%.1f** | %s |\n", r.key, r.name, r.rps, spread, round(r.p99),
			cell(r, procServer), cell(r, procRedis), r.redisUS, cell(r, procWorker), cell(r, procMariaDB), r.total(), cell(r, procWrk))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		for i, p := range r.persisted {
			var idle []string
			for _, name := range serviceProcs {
				idle = append(idle, fmt.Sprintf("%s %.0f", name, float64(p.idle[name])/float64(time.Millisecond)))
			}
			delivered := ""
			if p.delivered > 0 {
				delivered = fmt.Sprintf("; the receiver had every order's order.accepted %v after the load", p.delivered.Round(10*time.Millisecond))
			}
			fmt.Fprintf(w, "- %s run %d: when the load ended the outbox held %d orders not yet in MySQL (the oldest waiting %v); "+
				"MySQL held every order %v later%s; lag from acceptance to row %v. Then, nothing arriving, ms of CPU a second: %s (not counted).\n",
				r.key, i+1, p.outbox, p.oldest.Round(time.Millisecond), p.caughtUp.Round(10*time.Millisecond), delivered, p.lag, strings.Join(idle, ", "))
		}
	}
	var whole *row
	for _, r := range rows {
		if r.key == "(f)+worker" {
			whole = r
		}
	}
	for _, hooked := range rows {
		if whole == nil || whole.rps == 0 || !strings.HasPrefix(hooked.key, "(f)+worker+hook") {
			continue
		}
		own := ""
		if v, ok := hooked.cpu[procHooksRedis]; ok {
			own = fmt.Sprintf(", the deliveries' own Redis %+.1f", v)
		}
		fmt.Fprintf(w, "- %s, one webhook endpoint subscribed to every event (issue 41: within 10%% of none): %.1f%% of the whole system's orders/s, "+
			"%+.1f µs of service CPU an order (api %+.1f, the sales' Redis %+.1f, worker %+.1f, MariaDB %+.1f%s).\n", hooked.key,
			100*hooked.rps/whole.rps, hooked.total()-whole.total(), hooked.cpu[procServer]-whole.cpu[procServer],
			hooked.cpu[procRedis]-whole.cpu[procRedis], hooked.cpu[procWorker]-whole.cpu[procWorker],
			hooked.cpu[procMariaDB]-whole.cpu[procMariaDB], own)
	}
	for _, base := range rows {
		if whole == nil || base.key != "(f)+worker@base" || base.rps == 0 || base.total() == 0 {
			continue
		}
		fmt.Fprintf(w, "- (f)+worker against %s (%s), run for run: %.1f%% of its orders/s, %+.1f µs of service CPU an order "+
			"(%.1f%% of its; api %+.1f, Redis %+.1f, worker %+.1f, MariaDB %+.1f).\n", base.key, base.name,
			100*whole.rps/base.rps, whole.total()-base.total(), 100*whole.total()/base.total(),
			whole.cpu[procServer]-base.cpu[procServer], whole.cpu[procRedis]-base.cpu[procRedis],
			whole.cpu[procWorker]-base.cpu[procWorker], whole.cpu[procMariaDB]-base.cpu[procMariaDB])
	}
	var fresh *row
	for _, r := range rows {
		if r.key == "(f)" {
			fresh = r
		}
	}
	for _, r := range rows {
		if !r.room || fresh == nil || fresh.rps == 0 {
			continue
		}
		fmt.Fprintf(w, "- %s, every order with its admission (issue 42): %.1f%% of (f)'s orders/s, %+.1f µs of service CPU an order (api %+.1f, Redis %+.1f).\n",
			r.key, 100*r.rps/fresh.rps, r.total()-fresh.total(), r.cpu[procServer]-fresh.cpu[procServer], r.cpu[procRedis]-fresh.cpu[procRedis])
	}
	if floor == nil || floor.total() == 0 {
		return
	}
	// The floor's service is its server and Redis: it persists nothing.
	base := floor.cpu[procServer] + floor.cpu[procRedis]
	for _, r := range rows {
		if r == floor || r.total() == 0 {
			continue
		}
		fmt.Fprintf(w, "- %s: %.0f%% of the floor's orders/s; %.1f µs of service CPU an order, %.2f× the floor's %.1f (its server and Redis).\n",
			r.key, 100*r.rps/floor.rps, r.total(), r.total()/base, base)
	}
	if o.launch {
		fmt.Fprintln(w, "- (-launch: only these rows were run.)")
	}
}

// launchRows are the rows the launch table shows, in its order.
func launchRows(rows []*row, whole ...*row) []*row {
	var out []*row
	for _, r := range rows {
		if r.key == "(a)" || r.key == "(b)" || r.fresh {
			out = append(out, r)
		}
	}
	return append(out, whole...)
}
