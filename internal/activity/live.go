package activity

import (
	"fmt"
	"time"
)

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
}

// SoldUnits is how many units are out: total minus what is left.
func (v Live) SoldUnits() int64 { return v.Total - v.Remaining }

// Report compares an activity's record in MySQL with its live figures in
// Redis.
type Report struct {
	InSync bool `json:"in_sync"`
	// Problems says what disagrees, one line each; empty when in sync.
	Problems []string `json:"problems"`
	// SoldUnits is total minus remaining in Redis.
	SoldUnits int64 `json:"sold_units"`
	// PersistedUnits is the units of orders recorded in MySQL and not
	// cancelled; -1 when unknown.
	PersistedUnits int64 `json:"persisted_units"`
}

// Reconcile compares a (MySQL) with v (Redis) and, when persisted ≥ 0, the
// units MySQL's orders account for with the units Redis says are sold. A
// sale in progress is in sync when every accepted order has been persisted.
func Reconcile(a Activity, v Live, persisted int64) Report {
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
		if persisted >= 0 && persisted != r.SoldUnits {
			add("Redis has sold %d units, MySQL's orders account for %d", r.SoldUnits, persisted)
		}
	}
	r.InSync = len(r.Problems) == 0
	if r.Problems == nil {
		r.Problems = []string{}
	}
	return r
}
