package loadtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Config is one load test.
type Config struct {
	// URL targets a running deployment; empty starts a local stack.
	URL string
	// AdminURL is where that deployment serves /admin/v1, if not at URL:
	// the compose stack's nginx serves it on its admin port only.
	AdminURL string
	// For a URL: its admin token and JWT secret (to mint users' tokens), and,
	// to check the invariants, its Redis and MySQL.
	AdminToken, JWTSecret string
	RedisURL, MySQLDSN    string
	RedisCluster          bool   // RedisURL names a Redis Cluster (REDIS_CLUSTER's form)
	RedisMaster           string // RedisURL names sentinels watching this primary (REDIS_SENTINEL_MASTER's form)

	APIs, Workers int // the local stack's shape (3 and 2)
	// Env is extra environment for the local stack's api and worker
	// processes ("K=V"), e.g. REQUEST_TIMEOUT=1s.
	Env []string
	// Sentinel runs the local stack's Redis as a primary, a replica and three
	// sentinels, with acknowledged writes (StackOptions.Sentinel).
	Sentinel bool
	// KillPrimaryAfter, with Sentinel, kills the primary -9 that long into
	// the wrk run (and restarts it as a replica once another is promoted);
	// the report's Failover says what followed.
	KillPrimaryAfter time.Duration

	Users    int           // distinct users wrk rotates through
	Stock    int           // units on sale
	Limit    int           // units per user
	Items    int           // the sale's items (each order names the next in turn); 0 or 1: one
	Duration time.Duration // of the wrk run
	Conns    int           // wrk connections
	Threads  int           // wrk threads

	ABRequests, ABConns int // the ab run: one user's burst; 0 requests skips it

	// HeartbeatEvery, when set, has every user send a presence heartbeat
	// (watching the sale) this often during the wrk run: users/HeartbeatEvery
	// a second besides the orders (RunHeartbeats). The report shows them
	// and the Redis memory presence holds.
	HeartbeatEvery time.Duration
	// HeartbeatCostWindow, with HeartbeatEvery, is how long the stack idles
	// and then takes heartbeats alone, before the orders, to measure what a
	// heartbeat costs Redis and the apis (Report.HeartbeatCost). Default 5s.
	HeartbeatCostWindow time.Duration

	// Crowd, above 0, adds a sale with a waiting room and a crowd of that
	// many new shoppers (RunCrowd) after the other phases: they arrive over
	// CrowdArriveOver, the first before the sale starts (CrowdStartsIn),
	// CrowdStream of them streaming their place and the rest polling, and
	// are let in CrowdAdmit a second to CrowdStock units.
	Crowd           int
	CrowdStream     float64
	CrowdAdmit      int
	CrowdStock      int
	CrowdStartsIn   time.Duration
	CrowdArriveOver time.Duration
	CrowdMaxPoll    time.Duration

	PersistTimeout time.Duration // how long to wait for MySQL to catch up

	Log func(format string, args ...any) // progress; nil is silent
}

// Defaults fills what is unset.
func (c *Config) Defaults() {
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&c.APIs, 3)
	set(&c.Workers, 2)
	set(&c.Users, 20000)
	set(&c.Stock, 10000)
	set(&c.Limit, 2)
	set(&c.Conns, 64)
	set(&c.Threads, 2)
	set(&c.ABConns, 50)
	if c.Duration == 0 {
		c.Duration = 20 * time.Second
	}
	if c.HeartbeatCostWindow == 0 {
		c.HeartbeatCostWindow = 5 * time.Second
	}
	if c.Crowd > 0 {
		set(&c.CrowdAdmit, 200)
		set(&c.CrowdStock, c.Crowd/2)
		if c.CrowdStartsIn == 0 {
			c.CrowdStartsIn = 5 * time.Second
		}
		if c.CrowdArriveOver == 0 {
			c.CrowdArriveOver = 2 * c.CrowdStartsIn
		}
	}
	if c.PersistTimeout == 0 {
		c.PersistTimeout = 2 * time.Minute
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Phase is one load generator's run against one sale.
type Phase struct {
	Name     string
	Activity int64
	Result   Result
}

// Report is everything a load test measured.
type Report struct {
	Target     string
	Phases     []Phase
	Persisted  bool          // every accepted order reached MySQL in time
	CaughtUp   time.Duration // from the end of the load until MySQL had every order
	Lag        Lag
	PeakRSS    map[string]int64 // local stack: by process
	Failover   *Failover        // KillPrimaryAfter's
	Heartbeats *Result          // HeartbeatEvery's
	Crowd      *CrowdResult     // Crowd's
	// HeartbeatCost is a heartbeat's CPU, measured alone before the orders
	// (HeartbeatEvery, with Redis access; not on a cluster).
	HeartbeatCost *HeartbeatCost
	// WrkCPU is the CPU used over the wrk run (with Redis access; not on a
	// cluster or with KillPrimaryAfter).
	WrkCPU *CPU
	// PresenceBytes is what the presence sets held in Redis after the run
	// (MEMORY USAGE), PresenceOnline how many clients they counted.
	PresenceBytes, PresenceOnline int64
	Invariants                    []invariants.Report
	Logs                          string // local stack: the processes' logs
}

// OK tells whether every invariant held and everything was persisted.
func (r Report) OK() bool {
	if !r.Persisted || len(r.Invariants) == 0 {
		return false
	}
	if r.Crowd != nil && len(r.Crowd.Problems()) > 0 {
		return false
	}
	for _, inv := range r.Invariants {
		if !inv.OK() {
			return false
		}
	}
	return true
}

// StartLocalStack starts the local stack of cfg (APIs, Workers) from this
// module's source, with the per-IP limit off: every client here is
// 127.0.0.1, and a per-IP limit would refuse the crowd.
func StartLocalStack(ctx context.Context, cfg Config) (*Stack, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	return StartStack(ctx, root, StackOptions{APIs: cfg.APIs, Workers: cfg.Workers, Log: cfg.Log, Sentinel: cfg.Sentinel,
		Env: append([]string{"RATE_LIMIT_IP_RPS=0"}, cfg.Env...)})
}

// Run runs a load test: a local stack (or cfg.URL), a flash sale driven by
// wrk with rotating users, one user's burst with ab on a second sale, then
// it waits for persistence and checks the invariants.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Defaults()
	rep := &Report{PeakRSS: map[string]int64{}}
	work, err := os.MkdirTemp("", "flashsale-loadtest-run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	var stack *Stack
	if cfg.URL == "" {
		stack, err = StartLocalStack(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer stack.Close()
		cfg.URL, cfg.AdminToken, cfg.JWTSecret = stack.URL, stack.AdminToken, stack.JWTSecret
		cfg.RedisURL, cfg.RedisMaster, cfg.MySQLDSN = stack.RedisURL, stack.RedisMaster, stack.MySQLDSN
		redis := "redis-server (appendfsync everysec)"
		if cfg.Sentinel {
			redis = "redis-server primary + replica + 3 sentinels (appendfsync everysec, REDIS_ACK_REPLICAS=1)"
		}
		apis := fmt.Sprintf("%d api behind nginx", cfg.APIs)
		if cfg.APIs == 1 {
			apis = "1 api" // StartStack puts nginx in front of more than one
		}
		rep.Target = fmt.Sprintf("local stack: %s, %d workers, %s, mariadbd; %d CPUs",
			apis, cfg.Workers, redis, runtime.NumCPU())
		rep.Logs = stack.Dir
	} else {
		rep.Target = cfg.URL
	}
	if cfg.AdminToken == "" || cfg.JWTSecret == "" {
		return nil, errors.New("loadtest: a URL needs its admin token and JWT secret")
	}

	tokens := filepath.Join(work, "tokens.txt")
	cfg.Log("minting %d users' tokens", cfg.Users)
	if err := WriteTokens(tokens, cfg.JWTSecret, 1, cfg.Users, 2*time.Hour); err != nil {
		return nil, err
	}
	if cfg.AdminURL == "" {
		cfg.AdminURL = cfg.URL
	}
	sale, err := CreateSale(ctx, cfg.AdminURL, cfg.AdminToken, Sale{Stock: cfg.Stock, Limit: cfg.Limit, Items: cfg.Items})
	if err != nil {
		return nil, err
	}
	// The CPU meters read one Redis server's INFO: not on a cluster.
	var meter *cpuMeter
	if cfg.RedisURL != "" && !cfg.RedisCluster {
		rdb, err := connect.Redis(cfg.RedisURL, connect.RedisMode{SentinelMaster: cfg.RedisMaster})
		if err != nil {
			return nil, err
		}
		defer rdb.Close()
		meter = &cpuMeter{rdb: rdb}
		if stack != nil {
			meter.apis = stack.APIs
		}
	}
	beatsFrom := 0 // the heartbeats during wrk go on from the cost window's users
	if cfg.HeartbeatEvery > 0 && meter != nil {
		cfg.Log("heartbeat cost: %v idle, then %v of heartbeats alone", cfg.HeartbeatCostWindow, cfg.HeartbeatCostWindow)
		rep.HeartbeatCost, err = measureHeartbeatCost(ctx, *meter,
			HeartbeatRun{URL: cfg.URL, Activity: sale, TokensFile: tokens, Every: cfg.HeartbeatEvery}, cfg.HeartbeatCostWindow)
		if err != nil {
			return nil, fmt.Errorf("loadtest: heartbeat cost: %w", err)
		}
		beatsFrom = int(rep.HeartbeatCost.Heartbeats.Requests)
	}
	var wrkCPU CPU
	var wrkStart CPU
	if meter != nil && cfg.KillPrimaryAfter == 0 {
		if wrkStart, err = meter.read(ctx); err != nil {
			return nil, err
		}
	}
	cfg.Log("wrk: %d connections for %v against activity %d (%d units, limit %d, %d users)", cfg.Conns, cfg.Duration, sale, cfg.Stock, cfg.Limit, cfg.Users)
	var failover chan error
	wrkCtx, wrkDone := context.WithCancel(ctx)
	if cfg.KillPrimaryAfter > 0 {
		if stack == nil || !cfg.Sentinel {
			wrkDone()
			return nil, errors.New("loadtest: killing the primary needs the local stack with Sentinel")
		}
		failover = make(chan error, 1)
		rep.Failover = &Failover{}
		go func() {
			f, err := runFailover(wrkCtx, cfg, stack, cfg.KillPrimaryAfter)
			*rep.Failover = f
			failover <- err
		}()
	}
	var beats chan Result
	if cfg.HeartbeatEvery > 0 {
		cfg.Log("heartbeats: each of %d users every %v (%.0f a second) while wrk runs", cfg.Users, cfg.HeartbeatEvery,
			float64(cfg.Users)/cfg.HeartbeatEvery.Seconds())
		beats = make(chan Result, 1)
		go func() {
			r, err := RunHeartbeats(wrkCtx, HeartbeatRun{URL: cfg.URL, Activity: sale, TokensFile: tokens, Every: cfg.HeartbeatEvery, Start: beatsFrom})
			if err != nil {
				cfg.Log("heartbeats: %v", err)
			}
			beats <- r
		}()
	}
	wrkStarted := time.Now()
	res, err := RunWrk(ctx, WrkRun{URL: cfg.URL, Activity: sale, TokensFile: tokens, Threads: cfg.Threads, Conns: cfg.Conns,
		Duration: cfg.Duration, Dir: work, Items: cfg.Items})
	wrkDone()
	if beats != nil {
		r := <-beats
		rep.Heartbeats = &r
	}
	if meter != nil && cfg.KillPrimaryAfter == 0 && err == nil {
		if wrkCPU, err = meter.read(ctx); err != nil {
			return nil, err
		}
		rep.WrkCPU = &CPU{Redis: wrkCPU.Redis - wrkStart.Redis, APIs: wrkCPU.APIs - wrkStart.APIs, HasAPIs: wrkCPU.HasAPIs,
			Seconds: time.Since(wrkStarted).Seconds()}
	}
	if failover != nil {
		if ferr := <-failover; ferr != nil {
			return nil, ferr
		}
		cfg.Log("failover: %v", rep.Failover)
	}
	if err != nil {
		return nil, err
	}
	rep.Phases = append(rep.Phases, Phase{Name: fmt.Sprintf("wrk, %d users rotating", cfg.Users), Activity: sale, Result: res})

	if cfg.ABRequests > 0 {
		burst, err := CreateSale(ctx, cfg.AdminURL, cfg.AdminToken, Sale{Stock: 100, Limit: cfg.Limit})
		if err != nil {
			return nil, err
		}
		t, _ := auth.New(cfg.JWTSecret)
		tok, _ := t.Issue(int64(cfg.Users)+1, time.Hour)
		cfg.Log("ab: one user, %d requests, %d at a time, against activity %d", cfg.ABRequests, cfg.ABConns, burst)
		res, err := RunAB(ctx, ABRun{URL: cfg.URL, Activity: burst, Token: tok, N: cfg.ABRequests, C: cfg.ABConns, Dir: work})
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, Phase{Name: "ab, one user's burst", Activity: burst, Result: res})
	}
	if cfg.Crowd > 0 {
		res, err := runCrowdPhase(ctx, cfg, rep)
		if err != nil {
			return nil, err
		}
		rep.Phases = append(rep.Phases, res)
	}
	loadEnded := time.Now()
	if stack != nil {
		for _, p := range append(append([]*Proc{}, stack.APIs...), stack.Workers...) {
			if n, err := p.PeakRSS(); err == nil {
				rep.PeakRSS[p.Name] = n
			}
		}
	}

	if cfg.RedisURL == "" || cfg.MySQLDSN == "" {
		cfg.Log("no Redis and MySQL given: invariants not checked")
		return rep, nil
	}
	rdb, err := connect.Redis(cfg.RedisURL, connect.RedisMode{Cluster: cfg.RedisCluster, SentinelMaster: cfg.RedisMaster})
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	db, err := sql.Open("mysql", cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	if rep.Heartbeats != nil {
		for _, key := range []string{rediskeys.PresenceAll, rediskeys.For(sale).Watching} {
			n, _ := rdb.MemoryUsage(ctx, key).Result()
			rep.PresenceBytes += n
		}
		rep.PresenceOnline, _ = rdb.ZCard(ctx, rediskeys.PresenceAll).Result()
	}
	cfg.Log("waiting for the worker to persist every accepted order")
	rep.Persisted = true
	for _, ph := range rep.Phases {
		ok, err := WaitPersisted(ctx, rdb, db, ph.Activity, cfg.PersistTimeout)
		if err != nil {
			return nil, err
		}
		rep.Persisted = rep.Persisted && ok
	}
	rep.CaughtUp = time.Since(loadEnded)
	if rep.Lag, err = PersistLag(ctx, db, rep.Phases[0].Activity); err != nil {
		return nil, err
	}
	for _, ph := range rep.Phases {
		accepted := ph.Result.Codes["202"] // wrk's and the crowd's
		if ph.Result.Tool == "ab" {
			accepted = ph.Result.Codes["2xx"]
		}
		inv, err := invariants.Run(ctx, rdb, db, ph.Activity, invariants.Options{Accepted: accepted, ExpectPersisted: true})
		if err != nil {
			return nil, err
		}
		rep.Invariants = append(rep.Invariants, inv)
	}
	return rep, nil
}

// String is the report for people.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale load test against %s\n", r.Target)
	for _, ph := range r.Phases {
		res := ph.Result
		if res.Tool == "crowd" && r.Crowd != nil {
			fmt.Fprintf(&b, "\n%s (activity %d):\n%s", ph.Name, ph.Activity, r.Crowd)
			for _, p := range r.Crowd.Problems() {
				fmt.Fprintf(&b, "  PROBLEM: %s\n", p)
			}
			continue
		}
		fmt.Fprintf(&b, "\n%s (activity %d): %d requests in %.1f s = %.0f requests/s\n", ph.Name, ph.Activity, res.Requests, res.Seconds, res.RPS())
		fmt.Fprintf(&b, "  latency p50 %v  p90 %v  p99 %v  max %v\n", ms(res.P50), ms(res.P90), ms(res.P99), ms(res.Max))
		fmt.Fprintf(&b, "  answers: %s", answers(res.Codes))
		if res.Errors > 0 {
			fmt.Fprintf(&b, "; %d transport errors or timeouts", res.Errors)
		}
		b.WriteString("\n")
	}
	r.writeHeartbeats(&b)
	r.writeCPU(&b)
	if len(r.Invariants) > 0 {
		state := "every accepted order is in MySQL"
		if !r.Persisted {
			state = "NOT every accepted order reached MySQL in time"
		}
		fmt.Fprintf(&b, "\npersistence: %s, %v after the load ended; lag from acceptance to row: %v\n",
			state, r.CaughtUp.Round(100*time.Millisecond), r.Lag)
	}
	if r.Failover != nil {
		fmt.Fprintf(&b, "failover: %v\n", *r.Failover)
	}
	if len(r.PeakRSS) > 0 {
		names := make([]string, 0, len(r.PeakRSS))
		for n := range r.PeakRSS {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.0f MB", n, float64(r.PeakRSS[n])/(1<<20)))
		}
		fmt.Fprintf(&b, "peak resident memory: %s\n", strings.Join(parts, ", "))
	}
	if len(r.Invariants) > 0 {
		b.WriteString("\ninvariants:\n")
		for _, inv := range r.Invariants {
			b.WriteString(inv.String())
			b.WriteString("\n")
		}
	}
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	if len(r.Invariants) == 0 {
		verdict = "NOT CHECKED (no Redis/MySQL access)"
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", verdict)
	return b.String()
}

// answers lists answers counted by kind for reading, in the kinds' order:
// "202 ×10000, 409 SOLD_OUT ×57".
func answers(codes map[string]int64) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, codes[k])
	}
	return strings.Join(parts, ", ")
}

// ms rounds a duration for reading.
func ms(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

// runCrowdPhase creates the crowd's sale and runs the crowd against it: a
// phase whose answers are the admitted's orders, for the invariants.
func runCrowdPhase(ctx context.Context, cfg Config, rep *Report) (Phase, error) {
	sale, err := CreateSale(ctx, cfg.AdminURL, cfg.AdminToken, Sale{Stock: cfg.CrowdStock, Limit: cfg.Limit, Items: cfg.Items,
		AdmitPerSecond: cfg.CrowdAdmit, StartsIn: cfg.CrowdStartsIn})
	if err != nil {
		return Phase{}, err
	}
	t, err := auth.New(cfg.JWTSecret)
	if err != nil {
		return Phase{}, err
	}
	// New users: after wrk's and ab's.
	tokens := make([]string, cfg.Crowd)
	for i := range tokens {
		if tokens[i], err = t.Issue(int64(cfg.Users+2+i), 2*time.Hour); err != nil {
			return Phase{}, err
		}
	}
	cfg.Log("crowd: %d shoppers arriving over %v at activity %d (%d units, %d admitted a second, starting in %v), %.0f%% streaming",
		cfg.Crowd, cfg.CrowdArriveOver, sale, cfg.CrowdStock, cfg.CrowdAdmit, cfg.CrowdStartsIn, 100*cfg.CrowdStream)
	res, err := RunCrowd(ctx, CrowdRun{URL: cfg.URL, Sale: sale, Tokens: tokens, Stream: cfg.CrowdStream, ArriveOver: cfg.CrowdArriveOver,
		MaxPoll: cfg.CrowdMaxPoll, Units: cfg.CrowdStock, Items: cfg.Items, NoTokenProbes: min(100, cfg.Crowd)})
	if err != nil {
		return Phase{}, err
	}
	rep.Crowd = &res
	return Phase{Name: fmt.Sprintf("a crowd of %d in a waiting room", cfg.Crowd), Activity: sale,
		Result: Result{Tool: "crowd", Requests: int64(res.Joined), Seconds: res.Seconds, Codes: res.Orders}}, nil
}
