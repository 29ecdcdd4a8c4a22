// Package rediscost measures what one accepted order costs Redis's main
// thread, phase by phase: the command bench/rediscost (`make
// bench-rediscost`; docs/benchmarks.md) and the strategy benchmark, whose
// Redis target it judges at saturation (bench/strategy).
//
// Run starts the load-test kit's stack of real processes (redis-server with
// the append-only file, mariadbd, one api to create the sale) and runs each
// phase of the order path on its own over the same orders, with the api's
// own components (the order store with its lock client, the task relay)
// called from Options.Conc goroutines; then a
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
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/tasks"
)

// Options is what Run measures. The zero value of a field is its
// command-line default (bench/rediscost).
type Options struct {
	Orders int // orders per phase (50,000)
	Conc   int // goroutines calling each phase at once (16)
	// NoRateLimit places the orders without the per-user rate limit (to
	// see the limit's share).
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
	// from a resent order's second charge (redisstore.Orders.Accept) among
	// its commands.
	Refused int
	// Items, when above 1, adds a phase of the same orders at a sale of
	// that many items (each order naming the next in turn), right after
	// the accept of the sale of one item and left out of the total: what
	// an order of an item costs beside an order of a sale of one, in one
	// run (docs/benchmarks.md, "Items").
	Items int
}

func (o Options) withDefaults() Options {
	if o.Orders <= 0 {
		o.Orders = 50_000
	}
	if o.Conc <= 0 {
		o.Conc = 16
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
	// Beside says the phase measured the accept again, at a sale of items
	// (Options.Items): another order's cost, so not in Total either.
	Beside bool
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
	pipe := redispipe.New(rdb)
	defer pipe.Close()
	locks := lock.NewClient(rdb, lock.Config{Prefix: rediskeys.LockPrefix, Pipeline: pipe})
	defer locks.Close()
	store := redisstore.New(rdb, redisstore.Config{Locks: locks})
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
	// user's turn (the per-user lock, the rate limit) and the accept in
	// the store's one step (Orders.Accept). By default the lock is elided
	// when free: one script, place.lua. With HoldUserLock it is taken for
	// every order: the lock's obtain, then place.lua with the release.
	userLocks := order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:" + strconv.FormatInt(id, 10)}
	turn := func(i int) order.UserTurn {
		t := order.UserTurn{Lock: true, Key: users[i], Options: userLocks, Hold: o.HoldUserLock, TTL: time.Minute}
		if !o.NoRateLimit {
			t.Limit = &order.RateLimit{Scope: "user", Who: users[i], PerSecond: 10}
		}
		return t
	}
	name, calls := "rate limit + lock + accept", "one script: place.lua (the lock checked free, the rate limit, the accept)"
	switch {
	case o.HoldUserLock && o.NoRateLimit:
		name, calls = "lock, accept + release", "the user lock's obtain, then place.lua: the accept and the release"
	case o.HoldUserLock:
		name, calls = "lock, rate limit + accept + release", "the user lock's obtain, then place.lua: the rate limit, the accept, the release"
	case o.NoRateLimit:
		name, calls = "lock + accept", "one script: place.lua (the lock checked free, the accept)"
	}
	accept := func(i int) error {
		acc, err := store.Accept(ctx, order.NewNo(id), order.PlaceRequest{ActivityID: id, UserID: int64(i + 1), Quantity: 1}, turn(i))
		accepted[i] = acc.Order
		return err
	}
	if o.Items > 1 {
		p, items, err := acceptBeside(ctx, m, stack, store, o, name, calls, accept, turn)
		if err != nil {
			return nil, err
		}
		phases = append(phases, p, items)
	} else if err := measure(name, calls, accept, nil); err != nil {
		return nil, err
	}
	if err := measure("relay", "the api's batched tasks: payment timeout + sync", func(i int) error {
		return relay.ExpireThenSync(ctx, accepted[i].No, accepted[i].PayBy)
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
		r, err := refusedPhase(ctx, m, store, id, o)
		if err != nil {
			return nil, err
		}
		phases = append(phases, r)
	}
	return phases, nil
}

// acceptBeside measures the accept of phase name (accept, as Run calls
// it) and the same users' orders with their turn at a sale of o.Items
// items, each naming the next item in turn (Options.Items), side by side:
// in quarters, taken in turn (one item, items, one item, items), so that
// what drifts on a shared machine while they run falls on both alike.
func acceptBeside(ctx context.Context, m meter, stack *loadtest.Stack, store *redisstore.Orders, o Options, name, calls string,
	accept func(int) error, turn func(int) order.UserTurn) (one, items Phase, err error) {
	id, err := loadtest.CreateSale(ctx, stack.URL, stack.AdminToken, loadtest.Sale{Stock: 2 * o.Orders, Limit: 100, Items: o.Items})
	if err != nil {
		return Phase{}, Phase{}, err
	}
	ofItem := func(i int) error {
		t := turn(i)
		t.Options.Set = "order-user:" + strconv.FormatInt(id, 10)
		_, err := store.Accept(ctx, order.NewNo(id), order.PlaceRequest{ActivityID: id, UserID: int64(i + 1), Quantity: 1,
			Item: loadtest.ItemSKU(i % o.Items)}, t)
		return err
	}
	n, half := o.Orders, o.Orders/2
	for _, part := range []struct {
		from, to int
		fn       func(int) error
		into     *Phase
	}{{0, half, accept, &one}, {0, half, ofItem, &items}, {half, n, accept, &one}, {half, n, ofItem, &items}} {
		p, err := m.phase(ctx, name, calls, part.to-part.from, func() error {
			return parallel(ctx, part.to-part.from, o.Conc, func(i int) error { return part.fn(part.from + i) })
		})
		if err != nil {
			return Phase{}, Phase{}, fmt.Errorf("%s: %w", name, err)
		}
		if part.into.Name == "" {
			*part.into = p
		} else {
			part.into.add(p)
		}
	}
	items.Name = fmt.Sprintf("%s, a sale of %d items", name, o.Items)
	items.Calls = "the same, each order naming the next item (no item of its own limit): its units too"
	items.Beside = true
	return one, items, nil
}

// refusedPhase sends o.Refused orders of one user, allowed one a second,
// from o.Conc goroutines at once, and meters the refused ones: the rate
// limit's refusal inside the one script, then the read of the order's
// number's own order in the same script (place.lua, Orders.Accept). The
// few the limit lets through are not counted.
func refusedPhase(ctx context.Context, m meter, store *redisstore.Orders, id int64, o Options) (Phase, error) {
	const user = 1_000_000_000 // no user of the other phases
	var refused atomic.Int64
	t := order.UserTurn{Lock: true, Key: strconv.Itoa(user), Hold: o.HoldUserLock, TTL: time.Minute,
		Options: order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:" + strconv.FormatInt(id, 10)},
		Limit:   &order.RateLimit{Scope: "user", Who: strconv.Itoa(user), PerSecond: 1}}
	p, err := m.phase(ctx, "refused: over the rate limit", "one user's orders, 1 a second allowed: place.lua checks the number's own order, then refuses", o.Refused, func() error {
		return parallel(ctx, o.Refused, o.Conc, func(int) error {
			_, err := store.Accept(ctx, order.NewNo(id), order.PlaceRequest{ActivityID: id, UserID: user, Quantity: 1}, t)
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
	fmt.Fprintf(w, "%d orders per phase, %d goroutines at once\n\n", o.Orders, o.Conc)
	fmt.Fprintln(w, "| phase | what each order does there | Redis CPU µs/order | commands run/order | orders/s in the phase |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	var cmds float64
	row := func(p Phase) {
		per := float64(p.Commands) / float64(p.Orders)
		fmt.Fprintf(w, "| %s | %s | %.1f | %.1f | %.0f |\n", p.Name, p.Calls, us(p.PerOrder()), per, float64(p.Orders)/p.Elapsed.Seconds())
		if !p.Refused && !p.Beside {
			cmds += per
		}
	}
	for _, p := range phases {
		if !p.Refused && !p.Beside {
			row(p)
		}
	}
	fmt.Fprintf(w, "| **total** | | **%.1f** | %.1f | |\n", us(Total(phases)), cmds)
	for _, p := range phases {
		if p.Refused || p.Beside {
			row(p) // per refused order, or an order of an item: not in the total
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
		if !p.Refused && !p.Beside {
			t += p.PerOrder()
		}
	}
	return t
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
