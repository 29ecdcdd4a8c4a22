package activity

import (
	"fmt"
	"time"
)

// PersistenceGrace is how long an order accepted or changed in Redis may
// wait for MySQL (on its sale's outbox) and still be on its way: within
// it the order is pending persistence, past it overdue. The reconciler
// queues an order again once it has waited this long (tasks.Reconciler's
// default Grace), and Reconcile reports an overdue order as a problem.
const PersistenceGrace = 5 * time.Second

// Live is an activity's live figures, as Redis keeps them while it sells
// (stock.Keeper.Read).
type Live struct {
	Known     bool // the activity was ever loaded
	Status    Status
	Total     int64
	Remaining int64
	Accepted  int64 // orders accepted
	Returned  int64 // orders whose units came back (cancelled, timed out, refunded)
	// Group buys: groups opened, and of those succeeded and failed.
	GroupsOpened, GroupsSucceeded, GroupsFailed int64
	// OldestUnrecorded is when the order waiting longest for MySQL was
	// accepted or changed (its outbox entry); zero when none waits.
	OldestUnrecorded time.Time
	// Unrecorded is how many orders wait for MySQL (the outbox's size),
	// Overdue how many of them longer than PersistenceGrace, and
	// UnrecordedOrders some of them, oldest first: the oldest and the
	// newest within the grace (at most stock.MaxUnrecordedRead of each),
	// read in the same snapshot as the figures above. Their Units come
	// from their records (admin.Service.Get).
	Unrecorded       int64
	Overdue          int64
	UnrecordedOrders []UnrecordedOrder
	// Shards are a sharded sale's figures shard by shard (nil for a sale
	// of one shard); the figures above are their sums, Total and Remaining
	// with the units on their way between shards.
	Shards []ShardLive
	// Items are a sale of several items' figures item by item, by SKU
	// (nil for a sale of one item: its figures are the sale's); Total and
	// Remaining above are their sums.
	Items []ItemLive
	// Paused: Redis refuses the sale's new orders until it resumes.
	Paused bool
}

// ItemLive is one item's figures of a sale of several (Live.Items): Total
// is its units in all (created, restocked), Remaining its units left.
type ItemLive struct {
	SKU              string
	Total, Remaining int64
}

// ItemFigures is v's figures of item sku: Items' one of that SKU, or for a
// sale of one item (no Items) the sale's own; false when v has none.
func (v Live) ItemFigures(sku string, oneItem bool) (ItemLive, bool) {
	for _, it := range v.Items {
		if it.SKU == sku {
			return it, true
		}
	}
	if len(v.Items) == 0 && oneItem && v.Known {
		return ItemLive{SKU: sku, Total: v.Total, Remaining: v.Remaining}, true
	}
	return ItemLive{}, false
}

// ShardLive is one shard's figures of a sharded sale (Live.Shards): Total
// is its allotment, what it sold and holds, which transfers move.
type ShardLive struct {
	Shard                                int
	Total, Remaining, Accepted, Returned int64
	Unrecorded                           int64
}

// UnrecordedOrder is an order whose latest state Redis holds and MySQL does
// not yet: accepted, or changed since it was recorded (an outbox entry).
type UnrecordedOrder struct {
	No    string
	Since time.Time // when it was accepted or changed (Redis's clock)
	// Units is how recording it will change the units MySQL's orders
	// account for: its quantity for an order MySQL has not held that holds
	// units, minus its quantity for one MySQL holds that holds none any
	// more (cancelled, refunded), else 0. Known says it was read from the
	// order's record; unknown, it is anything within the per-user limit.
	Units int64
	Known bool
}

// SoldUnits is how many units are out: total minus what is left.
func (v Live) SoldUnits() int64 { return v.Total - v.Remaining }

// SyncState is a Report's verdict.
type SyncState string

// The verdicts: MySQL holds Redis's latest of everything; orders are on
// their way to MySQL, each within PersistenceGrace, and explain every
// difference (no problem: the worker is catching up); or something is
// wrong (Report.Problems says what).
const (
	InSync             SyncState = "in_sync"
	PendingPersistence SyncState = "pending_persistence"
	HasProblems        SyncState = "problems"
)

// Report compares an activity's record in MySQL with its live figures in
// Redis.
type Report struct {
	State SyncState `json:"state"`
	// InSync is State == InSync.
	InSync bool `json:"in_sync"`
	// Problems says what disagrees, one line each; empty unless State is
	// HasProblems.
	Problems []string `json:"problems"`
	// Pending is the orders on their way to MySQL within PersistenceGrace.
	Pending Pending `json:"pending"`
	// SoldUnits is total minus remaining in Redis.
	SoldUnits int64 `json:"sold_units"`
	// PersistedUnits is the units of orders recorded in MySQL and not
	// cancelled; -1 when unknown.
	PersistedUnits int64 `json:"persisted_units"`
}

// Pending is orders accepted or changed in Redis within PersistenceGrace
// and not yet recorded in MySQL.
type Pending struct {
	Orders int64 `json:"orders"`
	// Units is how recording them will change the units MySQL's orders
	// account for (UnrecordedOrder.Units, summed over those known).
	Units int64 `json:"units"`
	// Unread is how many of Orders Units leaves out: their records were
	// not read (beyond stock.MaxUnrecordedRead of the newest). 0 unless
	// more than that many orders came within the grace.
	Unread int64 `json:"unread"`
}

// Reconcile compares a (MySQL) with v (Redis) at now and, when persisted ≥
// 0, the units MySQL's orders account for with the units Redis says are
// sold. Orders still waiting for MySQL explain a difference: each within
// what recording it changes (UnrecordedOrder.Units), in any combination, as
// the worker records them while the figures are read. Orders waiting up to
// PersistenceGrace are pending, not a problem; one waiting longer is, and
// so is a difference they do not explain.
func Reconcile(a Activity, v Live, persisted int64, now time.Time) Report {
	r := Report{SoldUnits: v.SoldUnits(), PersistedUnits: persisted}
	add := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	switch {
	case a.Status == Draft && v.Known:
		add("a draft activity has stock in Redis")
	case a.Status != Draft && !v.Known:
		add("a %s activity has no stock in Redis", a.Status)
	}
	if v.Known {
		if v.Status != a.Status {
			add("status is %s in MySQL but %s in Redis", a.Status, v.Status)
		}
		if v.Total != int64(a.TotalStock) {
			add("total stock is %d in MySQL but %d in Redis", a.TotalStock, v.Total)
		}
		if v.Remaining < 0 || v.Remaining > v.Total {
			add("Redis has %d units left of %d", v.Remaining, v.Total)
		}
		r.items(a, v, add)
		lo, hi, overdue := r.unrecorded(a, v, now)
		if overdue > 0 {
			add("%s waited more than %s for MySQL (the oldest since %s)", ordersHave(overdue),
				PersistenceGrace, v.OldestUnrecorded.UTC().Format(time.RFC3339))
		}
		if diff := r.SoldUnits - persisted; persisted >= 0 && (diff < lo || diff > hi) {
			if lo == 0 && hi == 0 {
				add("Redis has sold %d units, MySQL's orders account for %d", r.SoldUnits, persisted)
			} else {
				add("Redis has sold %d units, MySQL's orders account for %d: a difference of %d, where the orders on their way to MySQL explain %d to %d",
					r.SoldUnits, persisted, diff, lo, hi)
			}
		}
	}
	switch {
	case len(r.Problems) > 0:
		r.State = HasProblems
	case v.Unrecorded > 0:
		r.State = PendingPersistence
	default:
		r.State = InSync
	}
	r.InSync = r.State == InSync
	if r.Problems == nil {
		r.Problems = []string{}
	}
	return r
}

// items checks a sale of several items item by item: each item's units
// in Redis (created, restocked) are its stock in MySQL, and its units left
// are within them. (What sold of each is checked against MySQL's orders by
// internal/invariants, once the orders are recorded.)
func (r *Report) items(a Activity, v Live, add func(string, ...any)) {
	if len(a.Items) < 2 {
		return // a sale of one item: the sale's figures are its
	}
	for _, it := range a.Items {
		live, ok := v.ItemFigures(it.SKU, false)
		switch {
		case !ok:
			add("item %s is not in Redis", it.SKU)
		case live.Total != int64(it.Stock):
			add("item %s's stock is %d in MySQL but %d in Redis", it.SKU, it.Stock, live.Total)
		case live.Remaining < 0 || live.Remaining > live.Total:
			add("Redis has %d units of item %s left of %d", live.Remaining, it.SKU, live.Total)
		}
	}
}

// unrecorded counts v's orders waiting for MySQL into r.Pending and
// returns the difference (sold minus persisted units) they explain, lo to
// hi, and how many have waited longer than PersistenceGrace: v.Overdue,
// counted whole in Redis (or those listed, if more). Those beyond
// UnrecordedOrders explain each up to the per-user limit either way; of
// them, those not overdue are pending, their units unread.
func (r *Report) unrecorded(a Activity, v Live, now time.Time) (lo, hi, overdue int64) {
	limit := int64(max(a.PerUserLimit, 1))
	var read int64 // pending orders whose units are known
	for _, u := range v.UnrecordedOrders {
		switch {
		case !u.Known:
			lo, hi = lo-limit, hi+limit
		case u.Units < 0:
			lo += u.Units
		default:
			hi += u.Units
		}
		if now.Sub(u.Since) > PersistenceGrace {
			overdue++
			continue
		}
		if u.Known {
			read++
			r.Pending.Units += u.Units
		}
	}
	if unlisted := v.Unrecorded - int64(len(v.UnrecordedOrders)); unlisted > 0 {
		lo, hi = lo-unlisted*limit, hi+unlisted*limit
	}
	overdue = max(overdue, v.Overdue)
	r.Pending.Orders = max(0, v.Unrecorded-overdue)
	r.Pending.Unread = max(0, r.Pending.Orders-read)
	return lo, hi, overdue
}

// ordersHave is "1 order has" or "n orders have".
func ordersHave(n int64) string {
	if n == 1 {
		return "1 order has"
	}
	return fmt.Sprintf("%d orders have", n)
}
