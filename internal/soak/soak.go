// Package soak is the fault soak (`make soak`; a short version runs in
// `make test`): a long randomised run on real processes — four flash sales
// (one in shards, one of three items, one behind a waiting room) and two
// group buys on sale at once, a crowd of shoppers queueing, placing, paying,
// cancelling and abandoning orders, opening and joining groups — while
// faults are injected at random: an api or a worker killed with -9 and
// restarted, Redis paused, MariaDB stopped and started, and the Redis
// primary killed -9 and failed over to its replica (Redis runs as the
// compose file deploys it: a primary, a replica and three sentinels).
// Every few seconds it checks what must hold
// at every instant (invariants.Live); at the end, once the faults are
// healed and the system has settled, everything (invariants.Run and
// Settled, and what the shoppers were told).
//
// One seed drives every random choice — the sales, the fault schedule
// (kind, target, length, gap) and each shopper's decisions — and is printed
// first, and every fault is printed with its time, so a failure can be
// replayed with -seed. The processes' timing is not replayed: the same seed
// gives the same faults at the same moments against a similar, not an
// identical, interleaving.
package soak

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/paysim"
)

// Options shape a soak.
type Options struct {
	Duration   time.Duration // of the load (default 1h)
	FaultEvery time.Duration // mean time from one fault healed to the next, drawn from ½ to 1½ of it (default 20s)
	Seed       int64         // 0 picks one, printed first
	Clients    int           // shoppers at once (default 24)
	CheckEvery time.Duration // between mid-run checks (default 3s)
	// SingleRedis runs Redis as one redis-server, and no failovers. The
	// default is a primary, a replica and three sentinels with acknowledged
	// writes (REDIS_ACK_REPLICAS=1), as the compose file deploys it, and
	// one more fault: the primary killed -9, a failover, the old primary
	// back as a replica (FailoverRedis).
	SingleRedis bool
	// Network runs every process as a host of a network whose links go
	// through toxiproxy (loadtest.StackOptions.Network), and adds the
	// network's faults (NetworkKinds) to the draw.
	Network bool
	// Only, when set, are the only kinds drawn (a scenario test of one).
	Only []string
	// NetFaultFor, when set, is every network fault's length (else drawn:
	// 10 s for a cut, 10–30 s of latency, 3–8 s of resets or cut replies).
	NetFaultFor time.Duration
	// SettleTimeout bounds the wait, after the load, for every deadline to
	// pass and the worker to catch up (default 5m: a task a killed worker
	// held comes back only after asynq's lease and its recovery pass).
	SettleTimeout time.Duration
	Log           func(format string, args ...any) // progress and faults; nil is silent
}

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = time.Hour
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = 20 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano() & (1<<53 - 1) // short enough to type back
	}
	if o.Clients <= 0 {
		o.Clients = 24
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = 3 * time.Second
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 5 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// run is one soak in progress.
type run struct {
	opt   Options
	start time.Time
	stack *loadtest.Stack
	rdb   redis.UniversalClient
	db    *sql.DB
	sales *catalog
	led   *ledger
	hist  *history // the flash sales' operations, for the linearizability check
	// provider signs the webhooks the shoppers send as the payment
	// provider would (late payments, replays), with the stack's secret.
	provider *paysim.Provider
	hooks    *receiver // the shop's webhooks' receiver (hooks.go); nil with Network
	rep      *Report
	repMu    sync.Mutex // rep's Failures and counters, from several goroutines
}

// Run runs a soak and reports. An error means the soak could not be run
// (the stack did not start, a fault could not be healed), not that an
// invariant broke: that is in the report (Report.OK).
func Run(ctx context.Context, opt Options) (*Report, error) {
	opt.defaults()
	r := &run{opt: opt, start: time.Now(), rep: &Report{Seed: opt.Seed}, hist: newHistory()}
	r.say("seed %d (replay: go run ./cmd/soak -seed %d -duration %v -fault-every %v -clients %d -sentinel=%v -network=%v)",
		opt.Seed, opt.Seed, opt.Duration, opt.FaultEvery, opt.Clients, !opt.SingleRedis, opt.Network)

	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	// Rate limits off: the load is the soak's choice, and every shopper
	// comes from 127.0.0.1.
	r.stack, err = loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 2, Workers: 2, Nginx: true, Sentinel: !opt.SingleRedis,
		Network: opt.Network,
		Env:     append([]string{"RATE_LIMIT_IP_RPS=0", "RATE_LIMIT_USER_RPS=0"}, hookEnv...),
		Log:     func(f string, args ...any) { r.say(f, args...) }})
	if err != nil {
		return nil, err
	}
	r.provider = paysim.New(paysim.Config{Secret: r.stack.WebhookSecret})
	defer func() {
		if !r.rep.OK() {
			r.rep.Logs = keepLogs(r.stack.Dir)
		}
		r.stack.Close()
	}()
	// Short timeouts and no retries: a check during a Redis pause is
	// skipped, not stalled. With Sentinel it follows the primary.
	if r.rdb, err = soakClient(r.stack); err != nil {
		return nil, err
	}
	defer r.rdb.Close()
	if r.db, err = sql.Open("mysql", r.stack.MySQLDSN); err != nil {
		return nil, err
	}
	defer r.db.Close()

	// Each part draws from its own stream of the seed, so the fault
	// schedule is the same whatever the number of shoppers.
	seeds := rand.New(rand.NewPCG(uint64(opt.Seed), 0))
	salesSeed, faultSeed, crowdSeed := seeds.Uint64(), seeds.Uint64(), seeds.Uint64()
	stockSeed := seeds.Uint64() // the admin's restocks and pauses (stocker.go)
	if !opt.Network {           // subscribed before the first sale: every event is owed to it
		if err := r.startReceiver(ctx, root); err != nil {
			return nil, err
		}
	}
	r.sales = newCatalog(r, rand.New(rand.NewPCG(salesSeed, 1)))
	if err := r.sales.open(ctx); err != nil {
		return nil, err
	}
	r.led = newLedger()
	tokens, err := mintTokens(r.stack.JWTSecret, opt.Duration+opt.SettleTimeout+time.Hour)
	if err != nil {
		return nil, err
	}

	// The load: shoppers, the catalog's rotation, the faults, the checks.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var shoppers, others sync.WaitGroup
	for i := range opt.Clients {
		s := newShopper(r, i, rand.New(rand.NewPCG(seeds.Uint64(), uint64(100+i))), tokens)
		shoppers.Go(func() { s.run(loadCtx) })
	}
	others.Go(func() { r.sales.rotate(loadCtx) })
	faultErr := make(chan error, 1)
	crowd := newShopper(r, opt.Clients, rand.New(rand.NewPCG(crowdSeed, 3)), tokens)
	f := newFaults(r, rand.New(rand.NewPCG(faultSeed, 2)), crowd)
	others.Go(func() { faultErr <- f.run(loadCtx) })
	others.Go(func() { r.checkLive(loadCtx) })
	others.Go(func() { r.stock(loadCtx, rand.New(rand.NewPCG(stockSeed, 4))) })

	r.say("load: %d shoppers for %v, a fault every %v on average", opt.Clients, opt.Duration, opt.FaultEvery)
	var runErr error
	select {
	case <-time.After(opt.Duration):
	case <-ctx.Done():
		runErr = ctx.Err()
	case runErr = <-faultErr: // a fault that could not be healed ends the run
	}
	stopLoad()
	shoppers.Wait()
	others.Wait() // the fault in progress, if any, is healed first
	crowd.later.Wait()
	select {
	case err := <-faultErr:
		if runErr == nil {
			runErr = err
		}
	default:
	}
	r.rep.Load = time.Since(r.start)
	r.say("load stopped; every fault healed")
	if runErr != nil {
		return r.rep, runErr
	}
	r.finishStock(ctx)
	loadEnded := time.Now()
	r.settle(ctx, loadEnded)
	r.rep.Settle = time.Since(loadEnded)
	if err := r.finalChecks(ctx); err != nil {
		return r.rep, err
	}
	r.rep.Total = time.Since(r.start)
	return r.rep, nil
}

// checkLive runs the mid-run checks on every sale every CheckEvery until
// ctx ends, and once more then.
func (r *run) checkLive(ctx context.Context) {
	t := time.NewTicker(r.opt.CheckEvery)
	defer t.Stop()
	for {
		r.liveRound(context.WithoutCancel(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// say logs a line stamped with the time since the start.
func (r *run) say(format string, args ...any) {
	r.opt.Log("t+%6.1fs "+format, append([]any{r.since().Seconds()}, args...)...)
}

func (r *run) since() time.Duration { return time.Since(r.start) }

// tally changes the report's counters, from any goroutine.
func (r *run) tally(f func(*Report)) {
	r.repMu.Lock()
	f(r.rep)
	r.repMu.Unlock()
}

// fail records a broken invariant (or a broken promise to a shopper).
func (r *run) fail(format string, args ...any) {
	msg := fmt.Sprintf("t+%.1fs ", r.since().Seconds()) + fmt.Sprintf(format, args...)
	r.repMu.Lock()
	r.rep.Failures = append(r.rep.Failures, msg)
	r.repMu.Unlock()
	r.opt.Log("FAIL %s", msg)
}

// AnswerWithin bounds the time a shopper waits for any answer: the api's
// REQUEST_TIMEOUT (its default, 3 s: the stack sets none) and a margin for
// nginx, a loaded machine and the answer's trip. Whatever the fault — a
// process killed, Redis paused, a link cut or slowed — a request is
// answered within it (a 503 with Retry-After when nothing better can be
// said), never left hanging: a try with no answer by then (the shopper's
// client gives up at twice that) is a failure. The margin is wide enough
// for a 2-core machine running the whole stack, the shoppers and other
// tests at once.
const AnswerWithin = 3*time.Second + 2*time.Second

// answeredIn notes how long one try took (status 0: no answer); past
// AnswerWithin it is a failure, the first few with their evidence.
func (r *run) answeredIn(ctx context.Context, what string, took time.Duration, status int) {
	if took <= AnswerWithin || ctx.Err() != nil {
		return
	}
	r.repMu.Lock()
	r.rep.Late++
	n := r.rep.Late
	r.repMu.Unlock()
	if n <= 5 {
		r.fail("%s: answered %d after %.1fs, past REQUEST_TIMEOUT and its margin (%v)", what, status, took.Seconds(), AnswerWithin)
	}
}

// keepLogs copies the stack's process logs somewhere that outlives it,
// for a failed run, and returns where.
func keepLogs(dir string) string {
	out, err := os.MkdirTemp("", "flashsale-soak-logs-")
	if err != nil {
		return ""
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(out, filepath.Base(l)), b, 0o644)
		}
	}
	return out
}

// soakClient is the soak's own client of the stack's Redis: short timeouts,
// no retries; of whichever server is primary with Sentinel.
func soakClient(st *loadtest.Stack) (redis.UniversalClient, error) {
	if st.RedisMaster != "" {
		opt, err := redis.ParseFailoverURL(st.RedisURL)
		if err != nil {
			return nil, err
		}
		opt.MasterName = st.RedisMaster
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.ReadTimeout, opt.DialTimeout = true, -1, 2*time.Second, time.Second
		if st.Net != nil { // the sentinels answer the servers' names
			opt.Dialer = st.Net.Dial
		}
		return redis.NewFailoverClient(opt), nil
	}
	opt, err := redis.ParseURL(st.RedisURL)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries, opt.ReadTimeout = true, -1, 2*time.Second
	return redis.NewClient(opt), nil
}
