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

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Config is one load test.
type Config struct {
	// URL targets a running deployment; empty starts a local stack.
	URL string
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
	Duration time.Duration // of the wrk run
	Conns    int           // wrk connections
	Threads  int           // wrk threads

	ABRequests, ABConns int // the ab run: one user's burst; 0 requests skips it

	// HeartbeatEvery, when set, has every user send a presence heartbeat
	// (watching the sale) this often during the wrk run: users/HeartbeatEvery
	// a second besides the orders (RunHeartbeats). The report shows them
	// and the Redis memory presence holds.
	HeartbeatEvery time.Duration

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

// Lag is how long accepted orders took to reach MySQL.
type Lag struct {
	N             int
	P50, P99, Max time.Duration
	// Slow counts orders over 2 s, accepted between SlowFrom and SlowTo
	// after the first order: a tail spread over the run is a backlog, one
	// bunched in a moment is a stall (a retry, a GC pause, a reconnect).
	Slow             int
	SlowFrom, SlowTo time.Duration
}

// String is the lag for people.
func (l Lag) String() string {
	s := fmt.Sprintf("p50 %v, p99 %v, max %v over %d orders", ms(l.P50), ms(l.P99), ms(l.Max), l.N)
	if l.Slow > 0 {
		s += fmt.Sprintf(" (%d over 2 s, accepted %v–%v into the run)", l.Slow,
			l.SlowFrom.Round(100*time.Millisecond), l.SlowTo.Round(100*time.Millisecond))
	}
	return s
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
	sale, err := CreateSale(ctx, cfg.URL, cfg.AdminToken, Sale{Stock: cfg.Stock, Limit: cfg.Limit})
	if err != nil {
		return nil, err
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
			r, err := RunHeartbeats(wrkCtx, HeartbeatRun{URL: cfg.URL, Activity: sale, TokensFile: tokens, Every: cfg.HeartbeatEvery})
			if err != nil {
				cfg.Log("heartbeats: %v", err)
			}
			beats <- r
		}()
	}
	res, err := RunWrk(ctx, WrkRun{URL: cfg.URL, Activity: sale, TokensFile: tokens, Threads: cfg.Threads, Conns: cfg.Conns, Duration: cfg.Duration, Dir: work})
	wrkDone()
	if beats != nil {
		r := <-beats
		rep.Heartbeats = &r
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
		burst, err := CreateSale(ctx, cfg.URL, cfg.AdminToken, Sale{Stock: 100, Limit: cfg.Limit})
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
		accepted := ph.Result.Codes["202"]
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

// WaitPersisted waits until MySQL holds as many orders of the activity as
// Redis accepted and the outbox is empty; false if timeout came first.
func WaitPersisted(ctx context.Context, rdb redis.UniversalClient, db *sql.DB, activity int64, timeout time.Duration) (bool, error) {
	k := rediskeys.For(activity)
	deadline := time.Now().Add(timeout)
	for {
		accepted, err := rdb.HGet(ctx, k.Meta, "accepted").Int64()
		if err != nil {
			return false, fmt.Errorf("loadtest: accepted count: %w", err)
		}
		backlog, err := rdb.ZCard(ctx, k.Outbox).Result()
		if err != nil {
			return false, err
		}
		var recorded int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE activity_id = ?", activity).Scan(&recorded); err != nil {
			return false, err
		}
		if recorded == accepted && backlog == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PersistLag measures, for the activity's orders that never changed status,
// the time from acceptance (Redis time) to their row's write.
func PersistLag(ctx context.Context, db *sql.DB, activity int64) (Lag, error) {
	// Times as microsecond offsets: a DSN given with -mysql-dsn may lack
	// parseTime.
	rows, err := db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM orders WHERE activity_id = ?), created_at),
		TIMESTAMPDIFF(MICROSECOND, created_at, updated_at) FROM orders WHERE activity_id = ? AND fence = 0`, activity, activity)
	if err != nil {
		return Lag{}, err
	}
	defer rows.Close()
	type order struct{ at, lag time.Duration } // at: after the first order
	var all []order
	for rows.Next() {
		var at, us int64
		if err := rows.Scan(&at, &us); err != nil {
			return Lag{}, err
		}
		o := order{at: time.Duration(at) * time.Microsecond, lag: time.Duration(us) * time.Microsecond}
		all = append(all, o)
	}
	if err := rows.Err(); err != nil || len(all) == 0 {
		return Lag{}, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lag < all[j].lag })
	at := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))].lag }
	l := Lag{N: len(all), P50: at(0.50), P99: at(0.99), Max: all[len(all)-1].lag}
	for _, o := range all {
		if o.lag <= 2*time.Second {
			continue
		}
		off := o.at
		if l.Slow == 0 || off < l.SlowFrom {
			l.SlowFrom = off
		}
		if off > l.SlowTo {
			l.SlowTo = off
		}
		l.Slow++
	}
	return l, nil
}

// String is the report for people.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale load test against %s\n", r.Target)
	for _, ph := range r.Phases {
		res := ph.Result
		fmt.Fprintf(&b, "\n%s (activity %d): %d requests in %.1f s = %.0f requests/s\n", ph.Name, ph.Activity, res.Requests, res.Seconds, res.RPS())
		fmt.Fprintf(&b, "  latency p50 %v  p90 %v  p99 %v  max %v\n", ms(res.P50), ms(res.P90), ms(res.P99), ms(res.Max))
		keys := make([]string, 0, len(res.Codes))
		for k := range res.Codes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, res.Codes[k]))
		}
		fmt.Fprintf(&b, "  answers: %s", strings.Join(parts, ", "))
		if res.Errors > 0 {
			fmt.Fprintf(&b, "; %d transport errors or timeouts", res.Errors)
		}
		b.WriteString("\n")
	}
	if r.Heartbeats != nil {
		h := r.Heartbeats
		var parts []string
		for code, n := range h.Codes {
			parts = append(parts, fmt.Sprintf("%s ×%d", code, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(&b, "\npresence heartbeats during the wrk run: %d in %.1f s = %.0f a second; latency p50 %v  p99 %v  max %v; answers: %s",
			h.Requests, h.Seconds, h.RPS(), ms(h.P50), ms(h.P99), ms(h.Max), strings.Join(parts, ", "))
		if h.Errors > 0 {
			fmt.Fprintf(&b, "; %d transport errors or timeouts", h.Errors)
		}
		fmt.Fprintf(&b, "\n  presence in Redis after the run: %d clients online, %d bytes (%.0f per client)\n",
			r.PresenceOnline, r.PresenceBytes, float64(r.PresenceBytes)/float64(max(r.PresenceOnline, 1)))
	}
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
