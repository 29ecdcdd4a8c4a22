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

// Live checks activity id while orders still flow, from one Holdings
// snapshot (a single MULTI, so no order falls between its reads): the stock
// is never negative, units left plus every user's units is the total, and
// every holder holds between one unit and the limit. Nothing else can be
// checked mid-run: the worker lags behind Redis, so MySQL legitimately
// disagrees (a cancelled order still pending there), and MySQL may be down.
//
// total and limit are the caller's — what it put on sale — so the check
// trusts neither MySQL nor the service's own copy of the rules in Redis.
func Live(ctx context.Context, rdb redis.UniversalClient, id, total, limit int64) (Report, error) {
	r := Report{ActivityID: id, Scope: "live", Total: total, Limit: limit}
	left, held, err := Holdings(ctx, rdb, id)
	if err != nil {
		return r, err
	}
	over, odd := 0, 0
	for _, v := range held {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			odd++ // a holder of nothing is deleted, never left at 0 or below
		}
		if n > limit {
			over++
		}
		r.Sold += n
	}
	add := r.adder()
	add("never oversold (live)", left >= 0 && left+r.Sold == total,
		"stock left %d + units users hold %d = %d, total %d", left, r.Sold, left+r.Sold, total)
	add("nobody over the limit (live)", over == 0 && odd == 0,
		"%d users hold units, %d over %d, %d holding none or less", len(held), over, limit, odd)
	return r, nil
}

// Settled checks activity id once it is settled: the load has stopped,
// every payment deadline and group deadline has passed, and the worker has
// caught up (its queue and the outbox are empty). Then every unpaid order
// has timed out, every unit came back exactly once per order that gave it
// back, and for a group buy every group ended one way: succeeded with
// every place paid, or failed with each paid member refunded and each
// unpaid one cancelled, and MySQL's group rows say the same. Run checks the
// orders themselves against MySQL; Settled adds what only holds at rest.
// The activity's type, total and limit are MySQL's.
func Settled(ctx context.Context, rdb redis.UniversalClient, db *sql.DB, id int64) (Report, error) {
	var typ string
	var total, limit int64
	if err := db.QueryRowContext(ctx, "SELECT type, total_stock, per_user_limit FROM activities WHERE id = ?", id).Scan(&typ, &total, &limit); err != nil {
		return Report{ActivityID: id, Scope: "settled"}, fmt.Errorf("invariants: activity %d: %w", id, err)
	}
	r, groups, err := settled(ctx, rdb, id, typ, total, limit)
	if err != nil {
		return r, err
	}
	if err := r.checkMoney(ctx, rdb, db, id); err != nil {
		return r, err
	}
	if typ != "groupbuy" {
		return r, nil
	}
	return r, r.checkGroupRows(ctx, db, groups)
}

// SettledRedis is Settled's checks of what Redis holds, for where there is
// no MySQL (the scripts' fuzz test): everything but the group rows, with
// the type, total and limit the sale's Redis meta holds.
func SettledRedis(ctx context.Context, rdb redis.UniversalClient, id int64) (Report, error) {
	m, err := rdb.HMGet(ctx, rediskeys.For(id).Meta, "type", "limit", "total", "sale_total").Result()
	if err != nil {
		return Report{ActivityID: id, Scope: "settled"}, fmt.Errorf("invariants: meta: %w", err)
	}
	typ, _ := m[0].(string)
	limit, _ := strconv.ParseInt(fmt.Sprint(m[1]), 10, 64)
	// The sale's total: a sharded sale's in every shard's meta (sale_total),
	// a sale of one shard's its total (as Conserved reads it).
	totalField := m[2]
	if m[3] != nil {
		totalField = m[3]
	}
	total, _ := strconv.ParseInt(fmt.Sprint(totalField), 10, 64)
	r, _, err := settled(ctx, rdb, id, typ, total, limit)
	return r, err
}

// settled is Settled's checks of Redis; for a group buy it also returns
// its groups, for checkGroupRows.
func settled(ctx context.Context, rdb redis.UniversalClient, id int64, typ string, total, limit int64) (Report, map[string]*redisGroup, error) {
	r := Report{ActivityID: id, Scope: "settled", Statuses: map[string]int64{}, Total: total, Limit: limit}
	k := rediskeys.For(id)
	orders, err := redisOrders(ctx, rdb, k)
	if err != nil {
		return r, nil, err
	}
	meta, err := shardMeta(ctx, rdb, id, "accepted", "returned")
	if err != nil {
		return r, nil, err
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return r, nil, fmt.Errorf("invariants: time: %w", err)
	}
	nowMs := now.UnixMilli()
	accepted, returned := meta[0], meta[1]

	r.Orders = int64(len(orders))
	var overdue, malformed []string
	for no, o := range orders {
		if o.malformed {
			malformed = append(malformed, no)
		}
		r.Statuses[o.status]++
		if live(o.status) {
			r.Sold += o.qty
		}
		if o.status == "pending_payment" && o.payByMs <= nowMs {
			overdue = append(overdue, no)
		}
	}
	add := r.adder()
	add("every order record well formed", len(malformed) == 0,
		"%d order records, %d malformed%s", r.Orders, len(malformed), examples(malformed))
	add("no unpaid order past its pay-by", len(overdue) == 0,
		"%d orders pending payment, %d past their pay-by%s", r.Statuses["pending_payment"], len(overdue), examples(overdue))
	add("every acceptance one order record", accepted == r.Orders,
		"meta counts %d accepted, Redis holds %d order records", accepted, r.Orders)
	if n, err := shardsOf(ctx, rdb, id); err == nil && n > 1 {
		held, total, err := Conserved(ctx, rdb, id)
		if err != nil {
			return r, nil, err
		}
		add("units conserved over shards", held == total,
			"%d shards' allotments and units on their way hold %d units, the sale has %d", n, held, total)
	}
	gaveBack := r.Statuses["cancelled"] + r.Statuses["refunded"]
	add("units returned exactly once", returned == gaveBack,
		"meta counts %d returns, %d orders cancelled and %d refunded", returned, r.Statuses["cancelled"], r.Statuses["refunded"])
	if typ != "groupbuy" {
		return r, nil, nil
	}
	groups, err := r.checkGroups(ctx, rdb, k, orders, nowMs)
	return r, groups, err
}

// redisGroup is a group record as Redis holds it.
type redisGroup struct {
	status          string
	size, paid      int64 // its size, and its count of payments
	members         int64 // its count of members (an unpaid member that left is not one)
	expiresMs       int64
	live, paidOrder int64 // its orders holding units, and those paid
	pending, refund int64 // its orders pending payment, and refunded
}

// checkGroups adds the group buy's checks of Redis to r, and returns its
// groups.
func (r *Report) checkGroups(ctx context.Context, rdb redis.UniversalClient, k rediskeys.Activity,
	orders map[string]redisOrder, nowMs int64) (map[string]*redisGroup, error) {
	recs, err := scanHashes(ctx, rdb, k.Group(""), "status", "size", "paid", "expires_ms", "members")
	if err != nil {
		return nil, fmt.Errorf("invariants: groups: %w", err)
	}
	groups := make(map[string]*redisGroup, len(recs))
	r.Groups = map[string]int64{}
	for gid, v := range recs {
		g := &redisGroup{status: v[0]}
		g.size, _ = strconv.ParseInt(v[1], 10, 64)
		g.paid, _ = strconv.ParseInt(v[2], 10, 64)
		g.expiresMs, _ = strconv.ParseInt(v[3], 10, 64)
		g.members, _ = strconv.ParseInt(v[4], 10, 64)
		groups[gid] = g
		r.Groups[g.status]++
	}
	// A group's orders are found by the group their record names, not by
	// the group's member list: a paid order that fell off the list would
	// otherwise escape its refund unseen.
	orphans := 0
	for _, o := range orders {
		if o.group == "" {
			continue
		}
		g, ok := groups[o.group]
		if !ok {
			orphans++
			continue
		}
		switch o.status {
		case "pending_payment":
			g.pending++
		case "paid":
			g.paidOrder++
		case "refunded":
			g.refund++
		}
		if live(o.status) {
			g.live++
		}
	}
	var unrefunded, unsettledMembers, short, oversize, stuck, miscounted []string
	for gid, g := range groups {
		switch {
		case g.status == "failed" && g.paidOrder > 0:
			unrefunded = append(unrefunded, fmt.Sprintf("%s: %d paid", gid, g.paidOrder))
		case g.status == "succeeded" && (g.paidOrder != g.size || g.paid != g.size || g.pending+g.refund > 0):
			short = append(short, fmt.Sprintf("%s: %d of %d paid (counter %d), %d pending, %d refunded", gid, g.paidOrder, g.size, g.paid, g.pending, g.refund))
		}
		if g.status == "failed" && g.pending > 0 {
			unsettledMembers = append(unsettledMembers, fmt.Sprintf("%s: %d pending", gid, g.pending))
		}
		if g.live > g.size || g.members > g.size || g.members < 0 {
			oversize = append(oversize, fmt.Sprintf("%s: %d live orders, %d members, %d places", gid, g.live, g.members, g.size))
		}
		// A payment counts once, when it is made; a refund (a failed
		// group's) does not take it back.
		if g.paid != g.paidOrder+g.refund {
			miscounted = append(miscounted, fmt.Sprintf("%s: counts %d, %d orders paid and %d refunded", gid, g.paid, g.paidOrder, g.refund))
		}
		if g.status == "forming" && g.expiresMs <= nowMs {
			stuck = append(stuck, gid+": forming past its deadline")
		}
	}
	overdue, err := rdb.ZRangeByScore(ctx, k.Unsettled(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(nowMs, 10)}).Result()
	if err != nil {
		return nil, fmt.Errorf("invariants: unsettled groups: %w", err)
	}
	for _, gid := range overdue {
		stuck = append(stuck, gid+": unsettled past its deadline")
	}

	add := r.adder()
	add("failed groups: every paid member refunded", len(unrefunded) == 0,
		"%d failed groups, %d with a member still paid%s", r.Groups["failed"], len(unrefunded), examples(unrefunded))
	add("failed groups: every unpaid member cancelled", len(unsettledMembers) == 0,
		"%d failed groups, %d with a member still pending%s", r.Groups["failed"], len(unsettledMembers), examples(unsettledMembers))
	add("succeeded groups: every place paid", len(short) == 0,
		"%d succeeded groups, %d without exactly their size paid%s", r.Groups["succeeded"], len(short), examples(short))
	add("no group over its size", len(oversize) == 0 && orphans == 0,
		"%d groups, %d with more live orders or members than places%s; %d orders of no known group", len(groups), len(oversize), examples(oversize), orphans)
	add("every group's payments counted once", len(miscounted) == 0,
		"%d groups, %d whose count of payments is not their orders paid or refunded%s", len(groups), len(miscounted), examples(miscounted))
	add("every group settled after its deadline", len(stuck) == 0,
		"%d groups, %d not settled%s", len(groups), len(stuck), examples(stuck))
	return groups, nil
}

// checkGroupRows adds to r the check that MySQL's group rows say what
// Redis's groups do.
func (r *Report) checkGroupRows(ctx context.Context, db *sql.DB, groups map[string]*redisGroup) error {
	rows, err := db.QueryContext(ctx, "SELECT group_id, status FROM `groups` WHERE activity_id = ?", r.ActivityID)
	if err != nil {
		return fmt.Errorf("invariants: group rows: %w", err)
	}
	defer rows.Close()
	var differ []string
	inMySQL := map[string]bool{}
	for rows.Next() {
		var gid, status string
		if err := rows.Scan(&gid, &status); err != nil {
			return fmt.Errorf("invariants: group rows: %w", err)
		}
		inMySQL[gid] = true
		switch g, ok := groups[gid]; {
		case !ok:
			differ = append(differ, gid+": in MySQL, not in Redis")
		case g.status != status:
			differ = append(differ, fmt.Sprintf("%s: Redis %s, MySQL %s", gid, g.status, status))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("invariants: group rows: %w", err)
	}
	for gid := range groups {
		if !inMySQL[gid] {
			differ = append(differ, gid+": not in MySQL")
		}
	}
	r.adder()("every group in MySQL with Redis's status", len(differ) == 0,
		"%d groups in Redis, %d rows in MySQL, %d missing or different%s", len(groups), len(inMySQL), len(differ), examples(differ))
	return nil
}

// adder appends checks to r.
func (r *Report) adder() func(name string, ok bool, format string, args ...any) {
	return func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
}

// examples is up to three of what broke, in order, for the detail (with a
// leading space), or "".
func examples(s []string) string {
	if len(s) == 0 {
		return ""
	}
	s = append([]string(nil), s...)
	sort.Strings(s)
	if len(s) > 3 {
		s = append(s[:3], "…")
	}
	return " (" + strings.Join(s, "; ") + ")"
}
