//go:build outboxbench

package mysqlstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// TestBenchOutbox accounts for what persisting an order costs MariaDB
// (issue 43, item 2: "for persistence, the worker's reads and the upsert,
// per order"): a mariadbd of its own, the worker's real batched writes
// (Orders.WriteMany: the orders' upsert and their events into the outbox,
// one transaction a batch, each taking the outbox's clock), then the
// dispatcher's passes (Webhooks.Undispatched after its cursor,
// MarkDispatched) and its skip with no endpoint, then the same orders as
// plain INSERTs (the least a row costs: with the orders' keys, with a
// primary key alone), each phase's mariadbd CPU (/proc/<pid>/stat, every
// thread) over the orders, twice. The variants of the outbox's keys it
// measured before the cursor (migrations/00016) are in docs/benchmarks.md;
// the bench at 958e040 runs them.
//
//	OUTBOX_N=40000 go test -tags outboxbench -count=1 -run TestBenchOutbox -v ./internal/mysqlstore/
func TestBenchOutbox(t *testing.T) {
	n := 40000
	if v, err := strconv.Atoi(os.Getenv("OUTBOX_N")); err == nil && v > 0 {
		n = v
	}
	m, dsn := testenv.StartMariaDB(t)
	db, err := connect.MySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cpu := func() time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.PID()))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	quiet := func() {
		// Let InnoDB's background work of the phase before settle.
		time.Sleep(3 * time.Second)
	}
	sale := int64(0)
	// writers runs k writers at once, writer g calling each(g, per) to write
	// its per of the n orders, and logs MariaDB's CPU and the writers' own
	// an order.
	writers := func(label string, k int, each func(g, per int)) {
		quiet()
		c0, t0, s0 := cpu(), time.Now(), selfCPU(t)
		var wg sync.WaitGroup
		per := n / k
		for g := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				each(g, per)
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		used, self := cpu()-c0, selfCPU(t)-s0
		t.Logf("%-58s %6.1f µs an order of mariadbd, %5.1f of the writers' process (%v CPU over %d orders in %v)", label,
			float64(used.Microseconds())/float64(per*k), float64(self.Microseconds())/float64(per*k), used, per*k, took.Round(time.Millisecond))
	}
	// write writes n orders as the worker does, 8 writers of 100 at a time
	// (or, eventsOnly, only their order.accepted events, appended as rows
	// of webhook_events, as the worker's transaction appended them before
	// an order's order.accepted was its row, migrations/00018: what that
	// row cost).
	write := func(label string, eventsOnly, withArgs bool) {
		sale++
		store := mysqlstore.NewOrders(db)
		if withArgs {
			store.UpsertWithArgs()
		}
		defer store.Close()
		hooks := mysqlstore.NewWebhooks(db)
		defer hooks.Close()
		now := time.Now()
		writers(label, 8, func(g, per int) {
			for i := 0; i < per; i += 100 {
				os := make([]order.Order, 0, 100)
				for j := i; j < min(i+100, per); j++ {
					u := int64(g*per + j + 1)
					os = append(os, order.Order{No: order.NewNo(sale), ActivityID: sale, UserID: u, Quantity: 1,
						PriceCents: 990, AmountCents: 990, Status: order.PendingPayment, Fence: 1, CreatedAt: now, Item: "LOAD-1"})
				}
				if eventsOnly {
					var evs []webhook.Event
					for _, o := range os {
						evs = append(evs, webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: o.Item, Currency: "cny"})...)
					}
					if err := hooks.Append(ctx, evs...); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if err := store.WriteMany(ctx, os); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// drain runs the dispatcher's pass until it passes nothing, and logs
	// MariaDB's CPU an order.
	drain := func(label string, pass func(*mysqlstore.Webhooks) (int, error)) {
		hooks := mysqlstore.NewWebhooks(db)
		defer hooks.Close()
		quiet()
		c0 := cpu()
		done := 0
		for {
			k, err := pass(hooks)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				break
			}
			done += k
		}
		used := cpu() - c0
		t.Logf("%-58s %6.1f µs an order of mariadbd (%v CPU, %d events)", label, float64(used.Microseconds())/float64(n), used, done)
	}
	// dispatch is the pass with an endpoint: read after the cursor, move it.
	dispatch := func(label string) {
		drain(label, func(hooks *mysqlstore.Webhooks) (int, error) {
			evs, through, err := hooks.Undispatched(ctx, 500)
			if err != nil || len(evs) == 0 {
				return 0, err
			}
			return len(evs), hooks.MarkDispatched(ctx, through)
		})
	}
	// skip is the pass with no endpoint enabled (Skip).
	skip := func(label string) {
		drain(label, func(hooks *mysqlstore.Webhooks) (int, error) { return hooks.Skip(ctx, 500) })
	}
	// plain writes the same orders as plain multi-row INSERTs of 500 rows
	// (the worker's batch) into table, two writers, each statement its own
	// commit: no upsert, no clock, no event. Into a table of the orders'
	// columns with a primary key alone, that is the least a row an order
	// can cost MariaDB (issue 43's model of its floor, docs/benchmarks.md);
	// into a copy of orders with its keys, what the keys add to it.
	for _, q := range []string{
		"CREATE TABLE bare_orders LIKE orders",
		"CREATE TABLE keyed_orders LIKE orders",
	} {
		if _, err := sqlDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var bareKeys []string
	rows, err := sqlDB.Query("SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'bare_orders' AND index_name <> 'PRIMARY'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		bareKeys = append(bareKeys, "DROP KEY `"+k+"`")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlDB.Exec("ALTER TABLE bare_orders " + strings.Join(bareKeys, ", ")); err != nil {
		t.Fatal(err)
	}
	const plainRow = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
	plain := func(label, table string) {
		sale++
		now := time.Now().UTC()
		writers(label, 2, func(g, per int) {
			for i := 0; i < per; i += 500 {
				k := min(500, per-i)
				args := make([]any, 0, 17*k)
				for j := range k {
					u := int64(g*per + i + j + 1)
					args = append(args, order.NewNo(sale), sale, u, 1, 990, 990, string(order.PendingPayment), 1, now,
						nil, nil, now, nil, nil, "LOAD-1", nil, u)
				}
				q := "INSERT INTO " + table + " (order_no, activity_id, user_id, quantity, price_cents, amount_cents, status, fence, " +
					"created_at, paid_at, cancelled_at, updated_at, group_id, payment_id, item_sku, cancel_reason, event_seq) VALUES " +
					strings.TrimSuffix(strings.Repeat(plainRow+",", k), ",")
				if _, err := sqlDB.ExecContext(ctx, q, args...); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 2 {
		write("orders and their events (the worker)", false, false)
		dispatch("the dispatcher: read after its cursor, move it")
		write("their order.accepted as rows of the outbox (before 00018)", true, false)
		dispatch("the dispatcher again")
		write("orders and their events, again", false, false)
		write("the same, the values as the driver's arguments (before)", false, true)
		skip("the dispatcher with no endpoint: its cursor moved (Skip)")
		plain("a plain INSERT: the orders' columns, their keys", "keyed_orders")
		plain("a plain INSERT: the orders' columns, a primary key alone", "bare_orders")
	}
	// OUTBOX_KEYS="orders.orders_group webhook_events.webhook_events_created"
	// weighs keys: the worker's write with them and without them,
	// alternated, three times each (each key dropped and added back with
	// its definition from SHOW CREATE TABLE).
	keys := strings.Fields(os.Getenv("OUTBOX_KEYS"))
	if len(keys) == 0 {
		return
	}
	defs := map[string]string{}
	for _, k := range keys {
		table, name, _ := strings.Cut(k, ".")
		var tbl, create string
		if err := sqlDB.QueryRow("SHOW CREATE TABLE "+table).Scan(&tbl, &create); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(create, "\n") {
			if line = strings.TrimSuffix(strings.TrimSpace(line), ","); strings.Contains(line, "KEY `"+name+"`") {
				defs[k] = line
			}
		}
		if defs[k] == "" {
			t.Fatalf("no key %s in %s", name, table)
		}
	}
	alter := func(add bool) {
		for _, k := range keys {
			table, name, _ := strings.Cut(k, ".")
			q := "ALTER TABLE " + table + " DROP KEY `" + name + "`"
			if add {
				q = "ALTER TABLE " + table + " ADD " + defs[k]
			}
			if _, err := sqlDB.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		write("the worker's write, every key", false, false)
		alter(false)
		write("the worker's write, without "+strings.Join(keys, ", "), false, false)
		alter(true)
	}
}

// selfCPU is this process's CPU so far (user and system): the writers'
// side, the worker's share of a write (the orders and events built, the
// statements encoded and sent).
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
