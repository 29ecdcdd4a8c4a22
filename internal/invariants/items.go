package invariants

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// item is one of a sale's items as MySQL records it, and what its stock
// ledger adds up to.
type item struct {
	sku              string
	price            int64
	initial, stock   int64
	limit            int64 // 0: the sale's alone
	ledger           int64 // the sum of its ledger rows' deltas
	ledgerLastAfter  int64 // its last ledger row's stock_after (-1: none)
	redisLeft, total int64 // Redis's units left and in all (a sale of several)
}

// saleItems reads activity id's items and their ledgers from MySQL, in
// their order; none for an activity made before items while an older
// release ran.
func saleItems(ctx context.Context, db *sql.DB, id int64) ([]*item, error) {
	rows, err := db.QueryContext(ctx, "SELECT sku, price_cents, initial_stock, stock, COALESCE(per_user_limit, 0) "+
		"FROM activity_items WHERE activity_id = ? ORDER BY position", id)
	if err != nil {
		return nil, fmt.Errorf("invariants: items: %w", err)
	}
	defer rows.Close()
	var items []*item
	by := map[string]*item{}
	for rows.Next() {
		it := &item{ledgerLastAfter: -1}
		if err := rows.Scan(&it.sku, &it.price, &it.initial, &it.stock, &it.limit); err != nil {
			return nil, fmt.Errorf("invariants: items: %w", err)
		}
		items = append(items, it)
		by[it.sku] = it
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("invariants: items: %w", err)
	}
	led, err := db.QueryContext(ctx, "SELECT sku, delta, stock_after FROM stock_ledger WHERE activity_id = ? ORDER BY id", id)
	if err != nil {
		return nil, fmt.Errorf("invariants: stock ledger: %w", err)
	}
	defer led.Close()
	for led.Next() {
		var sku string
		var delta, after int64
		if err := led.Scan(&sku, &delta, &after); err != nil {
			return nil, fmt.Errorf("invariants: stock ledger: %w", err)
		}
		if it := by[sku]; it != nil {
			it.ledger += delta
			it.ledgerLastAfter = after
		}
	}
	return items, led.Err()
}

// itemChecks are a sale's checks item by item (a sale of one item: its
// ledger's alone; the sale's checks are its item's):
//   - each item's stock is what it was created with plus its ledger
//     (restocks less removals), and so is its ledger's last stock_after;
//   - never oversold, item by item: in Redis its units left plus its live
//     orders' are its units in all, which are MySQL's stock; in MySQL its
//     live orders' units are at most its stock: sold ≤ initial + added −
//     removed;
//   - nobody over an item's own limit, in Redis (each user's count of such
//     an item, the only ones Redis counts, matching their orders of it) and
//     in MySQL;
//   - every order names an item of the sale at its price, and MySQL's
//     rows say the same (item, unit price, quantity × price).
func (r *Report) itemChecks(ctx context.Context, rdb redis.UniversalClient, db *sql.DB,
	orders, recorded map[string]redisOrder, add func(string, bool, string, ...any)) error {
	items, err := saleItems(ctx, db, r.ActivityID)
	if err != nil || len(items) == 0 {
		return err
	}
	bad := []string{}
	for _, it := range items {
		if it.stock != it.initial+it.ledger || (it.ledgerLastAfter >= 0 && it.ledgerLastAfter != it.stock) {
			bad = append(bad, fmt.Sprintf("%s: stock %d, created with %d, ledger %+d (last after %d)",
				it.sku, it.stock, it.initial, it.ledger, it.ledgerLastAfter))
		}
	}
	add("each item's stock is its ledger's", len(bad) == 0, "%d items %s", len(items), strings.Join(bad, "; "))
	if len(items) < 2 {
		return nil
	}
	by := map[string]*item{}
	for _, it := range items {
		by[it.sku] = it
	}
	k := rediskeys.For(r.ActivityID)
	h, err := rdb.HGetAll(ctx, k.Items).Result()
	if err != nil {
		return fmt.Errorf("invariants: items hash: %w", err)
	}
	iheld, err := rdb.HGetAll(ctx, k.ItemUsers).Result()
	if err != nil {
		return fmt.Errorf("invariants: item users: %w", err)
	}
	for _, it := range items {
		it.redisLeft, _ = strconv.ParseInt(h["left:"+it.sku], 10, 64)
		it.total, _ = strconv.ParseInt(h["total:"+it.sku], 10, 64)
	}

	// Redis: units left and sold of each item; who holds what of it.
	sold := map[string]int64{}
	perUser := map[string]int64{} // "<user>:<sku>"
	wrongItem := 0
	for _, o := range orders {
		it := by[o.item]
		if it == nil || o.price != it.price {
			wrongItem++
			continue
		}
		if live(o.status) {
			sold[o.item] += o.qty
			if it.limit > 0 { // Redis counts a user's units of an item with a limit of its own only
				perUser[strconv.FormatInt(o.user, 10)+":"+o.item] += o.qty
			}
		}
	}
	bad = bad[:0]
	for _, it := range items {
		if it.redisLeft < 0 || it.redisLeft+sold[it.sku] != it.total || it.total != it.stock {
			bad = append(bad, fmt.Sprintf("%s: %d left + %d sold, %d in Redis, stock %d", it.sku, it.redisLeft, sold[it.sku], it.total, it.stock))
		}
	}
	add("each item never oversold (Redis)", len(bad) == 0 && wrongItem == 0,
		"%d items; %d orders of no item of the sale or not at its price %s", len(items), wrongItem, strings.Join(bad, "; "))
	over, wrongCount := 0, 0
	pairs := map[string]bool{}
	for p := range perUser {
		pairs[p] = true
	}
	for p := range iheld {
		pairs[p] = true
	}
	for p := range pairs {
		_, sku, _ := strings.Cut(p, ":")
		if it := by[sku]; it != nil && it.limit > 0 && perUser[p] > it.limit {
			over++
		}
		if n, _ := strconv.ParseInt(iheld[p], 10, 64); n != perUser[p] {
			wrongCount++
		}
	}
	add("nobody over an item's limit (Redis)", over == 0 && wrongCount == 0,
		"%d holdings of an item, %d over its limit, %d with a count unlike their orders", len(perUser), over, wrongCount)

	// MySQL: the same of the rows recorded.
	mysqlSold := map[string]int64{}
	mysqlPerUser := map[string]int64{}
	rowsBad := []string{}
	for no, m := range recorded {
		it := by[m.item]
		if it == nil || m.price != it.price || m.amount != m.qty*m.price || (orders[no].item != "" && orders[no].item != m.item) {
			if len(rowsBad) < 3 {
				rowsBad = append(rowsBad, fmt.Sprintf("%s: item %q price %d amount %d", no, m.item, m.price, m.amount))
			}
			continue
		}
		if live(m.status) {
			mysqlSold[m.item] += m.qty
			mysqlPerUser[strconv.FormatInt(m.user, 10)+":"+m.item] += m.qty
		}
	}
	sort.Strings(rowsBad)
	add("every order has its item and price (MySQL)", len(rowsBad) == 0, "%d rows %s", len(recorded), strings.Join(rowsBad, "; "))
	bad = bad[:0]
	for _, it := range items {
		if mysqlSold[it.sku] > it.stock {
			bad = append(bad, fmt.Sprintf("%s: %d sold of %d", it.sku, mysqlSold[it.sku], it.stock))
		}
	}
	mysqlOver := 0
	for p, n := range mysqlPerUser {
		_, sku, _ := strings.Cut(p, ":")
		if it := by[sku]; it.limit > 0 && n > it.limit {
			mysqlOver++
		}
	}
	add("each item never oversold, nobody over its limit (MySQL)", len(bad) == 0 && mysqlOver == 0,
		"%d over an item's limit %s", mysqlOver, strings.Join(bad, "; "))
	return nil
}

// LiveItems is Live for a sale whose total moves (restocks: admin changes
// while it sells) and that may sell several items: the total is the one
// Redis holds, read in the same MULTI as the stock, the holders and the
// items, so no order and no restock falls between its reads. The stock is
// never negative; units left plus every user's units is the sale's total;
// its items' units left add up to its stock and their units in all to its
// total, none left below zero or above its own total; every holder holds
// between one unit and the limit. A sale of one shard.
func LiveItems(ctx context.Context, rdb redis.UniversalClient, id, limit int64) (Report, error) {
	r := Report{ActivityID: id, Scope: "live", Limit: limit}
	k := rediskeys.For(id)
	var stockCmd *redis.StringCmd
	var usersCmd, itemsCmd *redis.MapStringStringCmd
	var totalCmd *redis.StringCmd
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		stockCmd, usersCmd = p.Get(ctx, k.Stock), p.HGetAll(ctx, k.Users)
		totalCmd, itemsCmd = p.HGet(ctx, k.Meta, "total"), p.HGetAll(ctx, k.Items)
		return nil
	}); err != nil {
		return r, fmt.Errorf("invariants: live items: %w", err)
	}
	left, err := stockCmd.Int64()
	if err != nil {
		return r, fmt.Errorf("invariants: stock: %w", err)
	}
	if r.Total, err = totalCmd.Int64(); err != nil {
		return r, fmt.Errorf("invariants: total: %w", err)
	}
	over, odd := 0, 0
	for _, v := range usersCmd.Val() {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			odd++
		}
		if n > limit {
			over++
		}
		r.Sold += n
	}
	add := r.adder()
	add("never oversold (live)", left >= 0 && left+r.Sold == r.Total,
		"stock left %d + units users hold %d = %d, total %d (Redis's, restocks in)", left, r.Sold, left+r.Sold, r.Total)
	add("nobody over the limit (live)", over == 0 && odd == 0,
		"%d users hold units, %d over %d, %d holding none or less", len(usersCmd.Val()), over, limit, odd)
	if h := itemsCmd.Val(); len(h) > 0 {
		var lefts, totals int64
		bad := 0
		for _, it := range itemsLive(h) {
			lefts, totals = lefts+it.left, totals+it.total
			if it.left < 0 || it.left > it.total {
				bad++
			}
		}
		add("the items add up (live)", lefts == left && totals == r.Total && bad == 0,
			"items' units left %d (stock %d), in all %d (total %d), %d items out of bounds", lefts, left, totals, r.Total, bad)
	}
	return r, nil
}

// itemLeft is one item's figures in a sale's items hash.
type itemLeft struct{ left, total int64 }

// itemsLive reads the items hash's units left and in all, by sku.
func itemsLive(h map[string]string) map[string]itemLeft {
	out := map[string]itemLeft{}
	for f, v := range h {
		n, _ := strconv.ParseInt(v, 10, 64)
		if sku, ok := strings.CutPrefix(f, "left:"); ok {
			it := out[sku]
			it.left = n
			out[sku] = it
		} else if sku, ok := strings.CutPrefix(f, "total:"); ok {
			it := out[sku]
			it.total = n
			out[sku] = it
		}
	}
	return out
}
