// Package invariants checks, after the fact, what a sale must never break:
// never oversold, nobody over their limit, every accepted order recorded in
// MySQL exactly once, Redis and MySQL agreeing (Run); once settled, every
// unit given back exactly once and every group buy's group ended one way,
// refunds included (Settled, or SettledRedis where there is no MySQL);
// and, while orders still flow, what holds at every instant (Live). It
// reads Redis and MySQL directly, with its own queries, and trusts none of
// the service's code: the load-test kit (internal/loadtest), the soak
// (internal/soak), the end-to-end tests and the scripts' fuzz test use it.
package invariants

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// Check is one invariant's verdict.
type Check struct {
	Name   string
	OK     bool
	Detail string // what was measured, and on failure what broke
}

// Report is every invariant of one activity.
type Report struct {
	ActivityID int64
	Scope      string           // "" for Run's, "live" for Live's, "settled" for Settled's
	Total      int64            // units on sale
	Limit      int64            // units per user
	Sold       int64            // units held by live orders (pending or paid), by Redis; Live: units users hold
	Orders     int64            // order records in Redis
	Statuses   map[string]int64 // Settled: order records by status
	Groups     map[string]int64 // Settled, a group buy: groups by status
	Checks     []Check
	Money      Money // Settled: the sale's money, as its checks counted it
}

// Money is a sale's money in MySQL: payments recorded, confirmed, their
// refunds, in cents.
type Money struct {
	Payments, Confirmed, Refunds int64
	PaidCents, RefundedCents     int64
}

// OK tells whether every check passed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return len(r.Checks) > 0
}

// String is the report as lines, one per check.
func (r Report) String() string {
	var b strings.Builder
	switch r.Scope {
	case "live":
		fmt.Fprintf(&b, "activity %d, live: %d of %d units held, limit %d per user\n", r.ActivityID, r.Sold, r.Total, r.Limit)
	case "webhooks":
		b.WriteString("the shop's webhooks, the outbox against the receiver\n")
	case "settled":
		fmt.Fprintf(&b, "activity %d, settled: %d orders %s", r.ActivityID, r.Orders, counts(r.Statuses))
		if r.Groups != nil {
			fmt.Fprintf(&b, ", groups %s", counts(r.Groups))
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "activity %d: %d of %d units sold in %d orders, limit %d per user\n", r.ActivityID, r.Sold, r.Total, r.Orders, r.Limit)
	}
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-44s %s\n", mark, c.Name, c.Detail)
	}
	return strings.TrimRight(b.String(), "\n")
}

// counts is "{a 1, b 2}" in key order.
func counts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Options tune a check.
type Options struct {
	// Accepted, when not negative, is how many 202 answers clients saw: every
	// one must be an order. (Clients that timed out may have missed some
	// 202s, so orders may be more, never fewer.)
	Accepted int64
	// ExpectPersisted requires every order to be in MySQL (after waiting for
	// the worker); false checks only the ones that are.
	ExpectPersisted bool
}

// Holdings reads activity id's units left and each user's units (user id
// -> units, as Redis keeps them) in one MULTI: a snapshot no order can fall
// between, even while orders are still being accepted. A sharded sale's
// are one MULTI a shard, summed (shardHoldings: exact as a shard's orders
// and transfers go, though not one snapshot of the sale).
func Holdings(ctx context.Context, rdb redis.UniversalClient, id int64) (left int64, held map[string]string, err error) {
	n, err := shardsOf(ctx, rdb, id)
	if err != nil {
		return 0, nil, err
	}
	if n > 1 {
		return shardHoldings(ctx, rdb, id, n)
	}
	k := rediskeys.For(id)
	var stockCmd *redis.StringCmd
	var usersCmd *redis.MapStringStringCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		stockCmd, usersCmd = p.Get(ctx, k.Stock), p.HGetAll(ctx, k.Users)
		return nil
	}); err != nil {
		return 0, nil, fmt.Errorf("invariants: stock and users: %w", err)
	}
	if left, err = stockCmd.Int64(); err != nil {
		return 0, nil, fmt.Errorf("invariants: stock: %w", err)
	}
	return left, usersCmd.Val(), nil
}

// redisOrder is an order record as Redis holds it.
type redisOrder struct {
	user    int64
	qty     int64
	status  string
	group   string // the group id of a group buy's order, else ""
	payment string // the provider's payment that paid it, else ""
	payByMs int64
	item    string // the item's sku ("": of a sale's one item, before items)
	price   int64  // unit price
	amount  int64  // MySQL's amount_cents (Redis keeps none: it is qty × price)
	// malformed: the record does not read as an order (a user, a quantity
	// from 1, a known status, a pay-by time).
	malformed bool
}

// live statuses hold units: a cancelled or refunded order gave them back.
func live(status string) bool { return status == "pending_payment" || status == "paid" }

// Run checks activity id. An error means the check could not be made
// (unreachable, no such activity), not that an invariant broke.
//
// Run it on a quiet sale: the stock and the holders are read in one MULTI,
// but the order records and MySQL after them, so an order accepted or
// expired during the check shows up as a mismatch. A client that hung up
// does not make a sale quiet: its request may still be running in the api.
func Run(ctx context.Context, rdb redis.UniversalClient, db *sql.DB, id int64, opt Options) (Report, error) {
	r := Report{ActivityID: id}
	if err := db.QueryRowContext(ctx, "SELECT total_stock, per_user_limit FROM activities WHERE id = ?", id).Scan(&r.Total, &r.Limit); err != nil {
		return r, fmt.Errorf("invariants: activity %d: %w", id, err)
	}
	k := rediskeys.For(id)

	// Redis: the stock, each user's units, every order record.
	left, held, err := Holdings(ctx, rdb, id)
	if err != nil {
		return r, err
	}
	orders, err := redisOrders(ctx, rdb, k)
	if err != nil {
		return r, err
	}
	r.Orders = int64(len(orders))
	perUser := map[int64]int64{}
	for _, o := range orders {
		if live(o.status) {
			r.Sold += o.qty
			perUser[o.user] += o.qty
		}
	}

	// MySQL: every recorded order of the activity.
	rows, err := db.QueryContext(ctx, "SELECT order_no, user_id, quantity, status, COALESCE(item_sku, ''), price_cents, amount_cents "+
		"FROM orders WHERE activity_id = ?", id)
	if err != nil {
		return r, fmt.Errorf("invariants: orders: %w", err)
	}
	defer rows.Close()
	recorded := map[string]redisOrder{}
	dupes := 0
	var mysqlSold int64
	mysqlPerUser := map[int64]int64{}
	for rows.Next() {
		var no string
		var o redisOrder
		if err := rows.Scan(&no, &o.user, &o.qty, &o.status, &o.item, &o.price, &o.amount); err != nil {
			return r, fmt.Errorf("invariants: orders: %w", err)
		}
		if _, seen := recorded[no]; seen {
			dupes++
		}
		recorded[no] = o
		if live(o.status) {
			mysqlSold += o.qty
			mysqlPerUser[o.user] += o.qty
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("invariants: orders: %w", err)
	}

	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}

	// Never oversold.
	add("never oversold (Redis)", left >= 0 && r.Sold <= r.Total && r.Sold+left == r.Total,
		"stock left %d + units of live orders %d = %d, total %d", left, r.Sold, r.Sold+left, r.Total)
	add("never oversold (MySQL)", mysqlSold <= r.Total, "units of live orders %d, total %d", mysqlSold, r.Total)

	// Nobody over the limit, and each user's count matches their orders.
	over, wrongCount := 0, 0
	users := map[int64]bool{}
	for u := range perUser {
		users[u] = true
	}
	for u := range held {
		id, _ := strconv.ParseInt(u, 10, 64)
		users[id] = true
	}
	for u := range users {
		if perUser[u] > r.Limit {
			over++
		}
		if h, _ := strconv.ParseInt(held[strconv.FormatInt(u, 10)], 10, 64); h != perUser[u] {
			wrongCount++
		}
	}
	add("nobody over the limit (Redis)", over == 0 && wrongCount == 0,
		"%d users hold units, %d over %d, %d with a count unlike their orders", len(perUser), over, r.Limit, wrongCount)
	mysqlOver := 0
	for _, n := range mysqlPerUser {
		if n > r.Limit {
			mysqlOver++
		}
	}
	add("nobody over the limit (MySQL)", mysqlOver == 0, "%d users over %d", mysqlOver, r.Limit)

	// Every accepted order in MySQL exactly once, and nothing else there.
	missing, unknown, differ := 0, 0, 0
	var examples []string
	for no, o := range orders {
		m, ok := recorded[no]
		switch {
		case !ok:
			missing++
			if len(examples) < 3 {
				examples = append(examples, "missing "+no)
			}
		case m.user != o.user || m.qty != o.qty || m.status != o.status:
			differ++
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("%s: Redis %s/%d, MySQL %s/%d", no, o.status, o.qty, m.status, m.qty))
			}
		}
	}
	for no := range recorded {
		if _, ok := orders[no]; !ok {
			unknown++
			if len(examples) < 3 {
				examples = append(examples, "not accepted "+no)
			}
		}
	}
	sort.Strings(examples)
	persistedOK := dupes == 0 && unknown == 0 && (missing == 0 || !opt.ExpectPersisted)
	add("every accepted order in MySQL exactly once", persistedOK,
		"%d orders in Redis, %d rows in MySQL, %d missing, %d duplicated, %d never accepted %s",
		len(orders), len(recorded), missing, dupes, unknown, strings.Join(examples, "; "))
	add("Redis and MySQL agree", differ == 0 && (mysqlSold == r.Sold || !opt.ExpectPersisted),
		"%d orders differ; live units Redis %d, MySQL %d", differ, r.Sold, mysqlSold)
	if opt.Accepted >= 0 {
		add("every 202 answer is an order", opt.Accepted <= r.Orders, "clients saw %d accepted, Redis holds %d orders", opt.Accepted, r.Orders)
	}
	if err := r.itemChecks(ctx, rdb, db, orders, recorded, add); err != nil {
		return r, err
	}
	return r, nil
}

// redisOrders reads every order record of k's activity (its orders hash
// in each of its shards, HSCAN: a shard's records share its slot), by the record's form alone (the
// order number is whatever field the scripts were given). A record whose
// fields do not read as an order is kept with malformed set.
func redisOrders(ctx context.Context, rdb redis.UniversalClient, k rediskeys.Activity) (map[string]redisOrder, error) {
	out := map[string]redisOrder{}
	n, err := shardsOf(ctx, rdb, k.ID)
	if err != nil {
		return nil, err
	}
	for sh := 0; sh < n; sh++ {
		if err := shardOrders(ctx, rdb, rediskeys.ForShard(k.ID, sh, n), out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shardOrders reads the order records of shard k into out.
func shardOrders(ctx context.Context, rdb redis.UniversalClient, k rediskeys.Activity, out map[string]redisOrder) error {
	iter := rdb.HScan(ctx, k.Orders, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		no := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		m := redisstore.RecordValues(iter.Val())
		var errs [3]error
		o := redisOrder{status: m["status"], group: m["group"], payment: m["payment"], item: m["item"]}
		o.price, _ = strconv.ParseInt(m["price"], 10, 64)
		o.user, errs[0] = strconv.ParseInt(m["user"], 10, 64)
		o.qty, errs[1] = strconv.ParseInt(m["qty"], 10, 64)
		o.payByMs, errs[2] = strconv.ParseInt(m["pay_by_ms"], 10, 64)
		switch o.status {
		case "pending_payment", "paid", "cancelled", "refunded":
			o.malformed = errors.Join(errs[:]...) != nil || o.qty < 1
		default:
			o.malformed = true
		}
		out[no] = o
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("invariants: order records: %w", err)
	}
	return nil
}

// scanHashes reads fields of every hash whose key starts with prefix, by
// the key's rest (on every master of a cluster: an activity's records share
// its slot, so one holds them). A hash without its first field is left out
// (it expired between SCAN and HMGET).
func scanHashes(ctx context.Context, rdb redis.UniversalClient, prefix string, fields ...string) (map[string][]string, error) {
	out := map[string][]string{}
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		flush := func() error {
			if len(keys) == 0 {
				return nil
			}
			p := c.Pipeline()
			cmds := make([]*redis.SliceCmd, len(keys))
			for i, key := range keys {
				cmds[i] = p.HMGet(ctx, key, fields...)
			}
			if _, err := p.Exec(ctx); err != nil && err != redis.Nil {
				return err
			}
			for i, cmd := range cmds {
				v := cmd.Val()
				if len(v) != len(fields) || v[0] == nil {
					continue
				}
				vals := make([]string, len(v))
				for j, x := range v {
					if x != nil {
						vals[j] = fmt.Sprint(x)
					}
				}
				out[strings.TrimPrefix(keys[i], prefix)] = vals
			}
			keys = keys[:0]
			return nil
		}
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	switch c := rdb.(type) {
	case *redis.Client:
		return out, scan(ctx, c)
	case *redis.ClusterClient:
		var mu sync.Mutex // the callbacks run at once and share out
		return out, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, n)
		})
	default:
		return nil, fmt.Errorf("unsupported client %T", rdb)
	}
}
