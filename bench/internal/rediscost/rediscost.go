// Package rediscost measures what one accepted order costs Redis's main
// thread, phase by phase: the command bench/rediscost (`make
// bench-rediscost`; docs/benchmarks.md) and the strategy benchmark, whose
// Redis target it judges at saturation (bench/strategy).
//
// Run starts the load-test kit's stack of real processes (redis-server with
// the append-only file, mariadbd, one api to create the sale) and runs each
// phase of the order path on its own over the same orders, with the api's
// own components (the lock client with the rate limit as its guard, the
// order store, the task relay) called from Options.Conc goroutines; then a
// real worker process persists them. Each phase's figure is the server's
// main-thread CPU time (INFO cpu, user + sys) over the phase, divided by the
// orders.
//
// Concurrency matters: the components pipeline concurrent callers, so the
// more callers a phase has, the less each costs. 64 is Redis near
// saturation, where what one Redis core can carry is decided; the default,
// 16, is 64 connections' worth of requests spread over the path's Redis
// stages. The strategy benchmark's end-to-end figure ((b)+worker, "Redis
// CPU µs/order") is the check on the sum at the load its api can make.
package rediscost

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/tasks"
)

// Options is what Run measures. The zero value of a field is its
// command-line default (bench/rediscost).
type Options struct {
	Orders int // orders per phase (50,000)
	Conc   int // goroutines calling each phase at once (16)
	Chunk  int // orders per chunk: with HoldUserLock the lock and accept phases alternate chunk by chunk (1024)
	// OwnKeys puts the per-user locks in keys of their own, not fields of
	// the sale's table (to compare).
	OwnKeys bool
	// NoRateLimit takes the user lock without the rate limit as its guard
	// (to see the limit's share).
	NoRateLimit bool
	// HoldUserLock takes the user lock for every order
	// (ORDER_USER_LOCK_HOLD), not deferred to the accept and elided when
	// free.
	HoldUserLock bool
	// ByCommand also lists each phase's commands (INFO commandstats):
	// calls and Redis µs per order.
	ByCommand bool
	// Refused, when not 0, adds a phase of that many orders of one user
	// over the rate limit (one a second), after the others and left out of
	// the total: what a refused order costs, the read that tells a refusal
	// from a resent order's second charge (redisstore.Store.Accept) among
	// its commands.
	Refused int
}

func (o Options) withDefaults() Options {
	if o.Orders <= 0 {
		o.Orders = 50_000
	}
	if o.Conc <= 0 {
		o.Conc = 16
	}
	if o.Chunk <= 0 {
		o.Chunk = 1024
	}
	return o
}

// Phase is one phase's measured cost.
type Phase struct {
	Name     string
	Calls    string        // what each order does in it
	CPU      time.Duration // the server's main-thread CPU over the phase
	Elapsed  time.Duration
	Commands int64 // commands the server ran (INFO commandstats), scripts' inner calls included
	Orders   int   // orders it measured: accepted ones, or refused ones in a Refused phase
	// Refused says the phase measured orders over the rate limit (Options.Refused):
	// no part of an accepted order's cost, so not in Total.
	Refused bool
	// ByCommand is INFO commandstats over the phase, by command; a
	// script's time includes its commands', which are listed too.
	ByCommand map[string]loadtest.CommandStat
}

// add counts q, another part of the same phase, into p.
func (p *Phase) add(q Phase) {
	p.CPU += q.CPU
	p.Elapsed += q.Elapsed
	p.Commands += q.Commands
	p.Orders += q.Orders
	if p.ByCommand == nil {
		p.ByCommand = map[string]loadtest.CommandStat{}
	}
	for name, st := range q.ByCommand {
		sum := p.ByCommand[name]
		p.ByCommand[name] = loadtest.CommandStat{Calls: sum.Calls + st.Calls, Usec: sum.Usec + st.Usec}
	}
}

// PerOrder is the phase's CPU per order.
func (p Phase) PerOrder() time.Duration { return p.CPU / time.Duration(p.Orders) }

// Run starts a stack and measures every phase over o.Orders orders.
func Run(ctx context.Context, o Options, say func(string, ...any)) ([]Phase, error) {
	o = o.withDefaults()
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return nil, err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Log: say})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	ropt, err := redis.ParseURL(stack.RedisURL)
	if err != nil {
		return nil, err
	}
	ropt.PoolSize = 4 * o.Conc
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	db, err := sql.Open("mysql", stack.MySQLDSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	id, err := loadtest.CreateSale(ctx, stack.URL, stack.AdminToken, loadtest.Sale{Stock: 2 * o.Orders, Limit: 100})
	if err != nil {
		return nil, err
	}
	// The api stays up (it made the sale) but idle; its background work
	// (sold-out watcher, presence flushes) shows in the idle rate below.
	m := meter{rdb: rdb}
	idle, err := m.idleRate(ctx, 3*time.Second)
	if err != nil {
		return nil, err
	}
	say("idle: redis spends %v of CPU per second with nothing to do", idle)

	// The api's components, built as internal/app builds them.
	locks := lock.NewClient(rdb, lock.Config{})
	defer locks.Close()
	store := redisstore.New(rdb, redisstore.Config{})
	defer store.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	relay := tasks.NewRelay(tasks.NewQueue(asynq.NewClientFromRedisClient(rdb)), log)

	n := o.Orders
	users := make([]string, n)
	for i := range users {
		users[i] = strconv.Itoa(i + 1)
	}
	accepted := make([]order.Order, n)
	var phases []Phase
	measure := func(name, calls string, fn func(i int) error, after func() error) error {
		say("%s: %d orders, %d at once", name, n, o.Conc)
		p, err := m.phase(ctx, name, calls, n, func() error {
			if err := parallel(ctx, n, o.Conc, fn); err != nil {
				return err
			}
			if after != nil {
				return after()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		phases = append(phases, p)
		return nil
	}

	// The path as the order service runs it (order.Service.Place): the
	// rate limit is the per-user lock's guard, the accept its finish. The
	// two phases alternate in chunks of o.Chunk orders, each metered on its
	// own: a chunk's locks are taken, then accepted and released, so the
	// sale's table of user locks holds at most a chunk, as it holds only the
	// requests in flight in the api. (Holding every order's lock from one
	// phase to the next grew the table to o.Orders fields, and Redis's
	// rehashing of it was a cost no api pays.) The locks' ttl is long enough
	// that none expires between its phases.
	sale := strconv.FormatInt(id, 10)
	orderLocks := redisstore.Locks{Locker: locks}
	held := make([]order.Lock, n)
	obtain := func(i int) error {
		// As order.Service takes it: the user's lock in the sale's table.
		lo := order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:" + sale, Defer: !o.HoldUserLock}
		if !o.NoRateLimit {
			lo.Limit = &order.RateLimit{Scope: "user", Who: users[i], PerSecond: 10}
		}
		key := users[i]
		if o.OwnKeys {
			lo.Set, key = "", "order-user:"+sale+":"+users[i]
		}
		l, err := orderLocks.Obtain(ctx, key, time.Minute, lo)
		held[i] = l
		return err
	}
	accept := func(i int) error {
		acc, err := store.Accept(ctx, order.NewNo(id), order.PlaceRequest{ActivityID: id, UserID: int64(i + 1), Quantity: 1}, held[i])
		accepted[i] = acc.Order
		return err
	}
	lockPhase := Phase{Name: "rate limit + lock", Calls: "the user lock's obtain in the sale's table, rate_limit.lua its guard (no fence)"}
	if o.NoRateLimit {
		lockPhase.Name, lockPhase.Calls = "lock", "the user lock's obtain in the sale's table (no fence, no rate limit)"
	}
	acceptPhase := Phase{Name: "accept + release", Calls: "accept.lua as the lock's finish: checks, stock, limit, record, outbox, release"}
	type step struct {
		into *Phase
		fn   func(int) error
	}
	steps := []step{{&lockPhase, obtain}, {&acceptPhase, accept}}
	if !o.HoldUserLock {
		// As order.Service runs it by default: the lock deferred to the
		// accept (its obtain sends nothing), which checks it is free and
		// runs the rate limit and accept.lua in one script
		// (lock.Deferred.RunWith): one phase.
		acceptPhase.Name, acceptPhase.Calls = "rate limit + lock + accept", "one script: the lock checked free (table_elide.lua), rate_limit.lua, accept.lua"
		if o.NoRateLimit {
			acceptPhase.Name, acceptPhase.Calls = "lock + accept", "one script: the lock checked free (table_elide.lua), accept.lua"
		}
		steps = []step{{&acceptPhase, func(i int) error {
			if err := obtain(i); err != nil {
				return err
			}
			return accept(i)
		}}}
	}
	say("%s: %d orders, %d at once, in chunks of %d", func() string {
		if o.HoldUserLock {
			return "rate limit + lock, accept + release"
		}
		return "rate limit + lock + accept"
	}(), n, o.Conc, o.Chunk)
	for from := 0; from < n; from += o.Chunk {
		to := min(from+o.Chunk, n)
		for _, step := range steps {
			p, err := m.phase(ctx, step.into.Name, step.into.Calls, to-from, func() error {
				return parallel(ctx, to-from, o.Conc, func(i int) error { return step.fn(from + i) })
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", step.into.Name, err)
			}
			step.into.add(p)
		}
	}
	for _, st := range steps {
		phases = append(phases, *st.into)
	}
	if err := measure("relay", "the api's batched tasks: payment timeout + sync", func(i int) error {
		return relay.Accepted(ctx, accepted[i].No, accepted[i].PayBy)
	}, func() error { relay.Close(); return nil }); err != nil {
		return nil, err
	}

	say("worker: a worker process persists the %d orders", n)
	p, err := m.phase(ctx, "worker", "dequeue, read, MySQL, persisted mark + outbox removal, done", n, func() error {
		if _, err := stack.StartWorker("worker"); err != nil {
			return err
		}
		return waitRecorded(ctx, db, id, n, 10*time.Minute)
	})
	if err != nil {
		return nil, err
	}
	// The worker's own idle work (asynq's heartbeats and schedulers, the
	// reconciler) runs whatever the load; over a short drain it is noise.
	phases = append(phases, p)
	if o.Refused > 0 {
		r, err := refusedPhase(ctx, m, store, orderLocks, id, o)
		if err != nil {
			return nil, err
		}
		phases = append(phases, r)
	}
	return phases, nil
}

// refusedPhase sends o.Refused orders of one user, allowed one a second,
// from o.Conc goroutines at once, and meters the refused ones: the rate
// limit's refusal inside the one script, then the read of the order's
// number (Store.Accept). The few the limit lets through are not counted.
func refusedPhase(ctx context.Context, m meter, store *redisstore.Store, locks redisstore.Locks, id int64, o Options) (Phase, error) {
	sale := strconv.FormatInt(id, 10)
	const user = 1_000_000_000 // no user of the other phases
	var refused atomic.Int64
	p, err := m.phase(ctx, "refused: over the rate limit", "one user's orders, 1 a second allowed: the script refuses, then the resend check reads the order's number", o.Refused, func() error {
		return parallel(ctx, o.Refused, o.Conc, func(int) error {
			lo := order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:" + sale, Defer: !o.HoldUserLock,
				Limit: &order.RateLimit{Scope: "user", Who: strconv.Itoa(user), PerSecond: 1}}
			l, err := locks.Obtain(ctx, strconv.Itoa(user), time.Minute, lo)
			if err == nil {
				_, err = store.Accept(ctx, order.NewNo(id), order.PlaceRequest{ActivityID: id, UserID: user, Quantity: 1}, l)
			}
			var limited *order.RateLimited
			if errors.As(err, &limited) {
				refused.Add(1)
				return nil
			}
			return err
		})
	})
	if err != nil {
		return Phase{}, fmt.Errorf("refused: %w", err)
	}
	if refused.Load() == 0 {
		return Phase{}, errors.New("refused: the rate limit refused none")
	}
	p.Orders, p.Refused = int(refused.Load()), true
	return p, nil
}

// parallel calls fn(0..n-1) from conc goroutines.
func parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// waitRecorded waits until MySQL holds n orders of the sale.
func waitRecorded(ctx context.Context, db *sql.DB, id int64, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var got int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE activity_id = ?", id).Scan(&got); err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d orders in MySQL after %v", got, n, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// meter reads the server's CPU and command counts.
type meter struct{ rdb *redis.Client }

// cpu is the main thread's CPU time so far.
func (m meter) cpu(ctx context.Context) (time.Duration, error) {
	return loadtest.RedisMainCPU(ctx, m.rdb)
}

// commands is INFO commandstats: what the server has run, by command.
func (m meter) commands(ctx context.Context) (map[string]loadtest.CommandStat, error) {
	return loadtest.RedisCommandStats(ctx, m.rdb)
}

func (m meter) idleRate(ctx context.Context, d time.Duration) (time.Duration, error) {
	before, err := m.cpu(ctx)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	after, err := m.cpu(ctx)
	if err != nil {
		return 0, err
	}
	return (after - before) * time.Second / d, nil
}

func (m meter) phase(ctx context.Context, name, calls string, n int, run func() error) (Phase, error) {
	cpu0, err := m.cpu(ctx)
	if err != nil {
		return Phase{}, err
	}
	cmd0, err := m.commands(ctx)
	if err != nil {
		return Phase{}, err
	}
	start := time.Now()
	if err := run(); err != nil {
		return Phase{}, err
	}
	elapsed := time.Since(start)
	cpu1, err := m.cpu(ctx)
	if err != nil {
		return Phase{}, err
	}
	cmd1, err := m.commands(ctx)
	if err != nil {
		return Phase{}, err
	}
	// The meter's own reads (INFO) are left out of the commands.
	p := Phase{Name: name, Calls: calls, CPU: cpu1 - cpu0, Elapsed: elapsed, Orders: n, ByCommand: map[string]loadtest.CommandStat{}}
	for name, st := range cmd1 {
		d := loadtest.CommandStat{Calls: st.Calls - cmd0[name].Calls, Usec: st.Usec - cmd0[name].Usec}
		if d.Calls > 0 && name != "info" {
			p.ByCommand[name] = d
			p.Commands += d.Calls
		}
	}
	return p, nil
}

// Print writes the phases as a markdown table.
func Print(w io.Writer, o Options, phases []Phase) {
	o = o.withDefaults()
	fmt.Fprintf(w, "%d orders per phase, %d goroutines at once, lock and accept alternating in chunks of %d\n\n", o.Orders, o.Conc, o.Chunk)
	fmt.Fprintln(w, "| phase | what each order does there | Redis CPU µs/order | commands run/order | orders/s in the phase |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	var cmds float64
	row := func(p Phase) {
		per := float64(p.Commands) / float64(p.Orders)
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.0f |\n", p.Name, p.Calls, us(p.PerOrder()), per, float64(p.Orders)/p.Elapsed.Seconds())
		if !p.Refused {
			cmds += per
		}
	}
	for _, p := range phases {
		if !p.Refused {
			row(p)
		}
	}
	fmt.Fprintf(w, "| **total** | | **%.1f** | %.1f | |\n", us(Total(phases)), cmds)
	for _, p := range phases {
		if p.Refused {
			row(p) // per refused order; not in the total
		}
	}
	if !o.ByCommand {
		return
	}
	for _, p := range phases {
		fmt.Fprintf(w, "\n%s, by command (INFO commandstats; a script's µs include its commands'):\n\n", p.Name)
		fmt.Fprintln(w, "| command | calls/order | µs/order |")
		fmt.Fprintln(w, "|---|---:|---:|")
		names := slices.SortedFunc(maps.Keys(p.ByCommand), func(a, b string) int {
			return cmp.Compare(p.ByCommand[b].Usec, p.ByCommand[a].Usec)
		})
		for _, name := range names {
			st := p.ByCommand[name]
			fmt.Fprintf(w, "| %s | %.3f | %.2f |\n", name, float64(st.Calls)/float64(p.Orders), float64(st.Usec)/float64(p.Orders))
		}
	}
}

// Total is the phases' CPU per order, summed: what an order costs Redis in
// all.
func Total(phases []Phase) time.Duration {
	var t time.Duration
	for _, p := range phases {
		if !p.Refused {
			t += p.PerOrder()
		}
	}
	return t
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
