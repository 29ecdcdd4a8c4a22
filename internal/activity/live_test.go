package activity_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
)

// Reconcile, seed → compare: the live figures, the units MySQL's orders
// account for and the orders on their way give a verdict, what is pending
// and the problems. Orders on their way within the grace explain a
// difference in any combination (the worker records them while the
// figures are read); past the grace, or beyond what they explain, it is a
// problem.
func TestReconcile_tellsPendingPersistenceFromProblems(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	sale := activity.Activity{Status: activity.Published, TotalStock: 10, PerUserLimit: 2}
	live := func(left int64, us ...activity.UnrecordedOrder) activity.Live {
		v := activity.Live{Known: true, Status: activity.Published, Total: 10, Remaining: left,
			Unrecorded: int64(len(us)), UnrecordedOrders: us}
		if len(us) > 0 {
			v.OldestUnrecorded = us[0].Since
		}
		return v
	}
	waiting := func(ago time.Duration, units int64) activity.UnrecordedOrder {
		return activity.UnrecordedOrder{No: "1-x", Since: now.Add(-ago), Units: units, Known: true}
	}
	for _, c := range []struct {
		name      string
		a         activity.Activity
		v         activity.Live
		persisted int64
		state     activity.SyncState
		pending   activity.Pending
		problems  []string
	}{
		{name: "every order recorded is in sync", a: sale, v: live(7), persisted: 3, state: activity.InSync},
		{name: "a just-accepted order not yet in MySQL is pending, not a problem",
			a: sale, v: live(9, waiting(100*time.Millisecond, 1)), persisted: 0,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1, Units: 1}},
		{name: "an order at the grace is still pending",
			a: sale, v: live(8, waiting(activity.PersistenceGrace, 2)), persisted: 0,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1, Units: 2}},
		{name: "a pending order the worker recorded while the figures were read explains nothing, and needs not",
			a: sale, v: live(8, waiting(time.Second, 2)), persisted: 2,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1, Units: 2}},
		{name: "a cancellation on its way explains MySQL counting more than Redis sold",
			a: sale, v: live(10, waiting(time.Second, -2)), persisted: 2,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1, Units: -2}},
		{name: "a pay on its way changes no units and is pending",
			a: sale, v: live(9, waiting(time.Second, 0)), persisted: 1,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1}},
		{name: "an order waiting past the grace is a problem",
			a: sale, v: live(9, waiting(activity.PersistenceGrace+time.Millisecond, 1)), persisted: 0,
			state: activity.HasProblems, pending: activity.Pending{},
			problems: []string{"1 order has waited more than 5s for MySQL (the oldest since 2026-11-26T11:59:54Z)"}},
		{name: "a difference no order on its way explains is a problem",
			a: sale, v: live(7, waiting(time.Second, 1)), persisted: 0,
			state: activity.HasProblems, pending: activity.Pending{Orders: 1, Units: 1},
			problems: []string{"Redis has sold 3 units, MySQL's orders account for 0: a difference of 3, where the orders on their way to MySQL explain 0 to 1"}},
		{name: "with nothing on its way, any difference is a problem",
			a: sale, v: live(9), persisted: 0, state: activity.HasProblems,
			problems: []string{"Redis has sold 1 units, MySQL's orders account for 0"}},
		{name: "an order whose record was not read explains up to the per-user limit either way",
			a: sale, v: live(8, activity.UnrecordedOrder{No: "1-x", Since: now}), persisted: 0,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 1, Unread: 1}},
		{name: "orders beyond those listed are pending, each within the per-user limit",
			a: sale, v: func() activity.Live { v := live(6, waiting(time.Second, 1)); v.Unrecorded = 2; return v }(), persisted: 1,
			state: activity.PendingPersistence, pending: activity.Pending{Orders: 2, Units: 1, Unread: 1}},
		{name: "a status mismatch is a problem, whatever is pending",
			a: activity.Activity{Status: activity.Closed, TotalStock: 10, PerUserLimit: 2}, v: live(9, waiting(time.Second, 1)), persisted: 0,
			state: activity.HasProblems, pending: activity.Pending{Orders: 1, Units: 1},
			problems: []string{"status is closed in MySQL but published in Redis"}},
		{name: "a published sale missing in Redis is a problem",
			a: sale, v: activity.Live{}, persisted: -1, state: activity.HasProblems,
			problems: []string{"a published activity has no stock in Redis"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := activity.Reconcile(c.a, c.v, c.persisted, now)
			if c.problems == nil {
				c.problems = []string{}
			}
			if r.State != c.state || r.InSync != (c.state == activity.InSync) || r.Pending != c.pending || !reflect.DeepEqual(r.Problems, c.problems) {
				t.Errorf("got state %s (in sync %v), pending %+v, problems %q\nwant %s, pending %+v, problems %q",
					r.State, r.InSync, r.Pending, r.Problems, c.state, c.pending, c.problems)
			}
			if r.SoldUnits != c.v.SoldUnits() || r.PersistedUnits != c.persisted {
				t.Errorf("sold %d, persisted %d", r.SoldUnits, r.PersistedUnits)
			}
		})
	}
}

// Orders past what the figures list are counted whole: all of a backlog
// overdue (issue 39's view said 1,000 of 13,100, and 12,100 "pending" with
// 0 units), or the newest past the listed thousand pending with their
// units unread.
func TestReconcile_countsEveryWaitingOrder_notOnlyThoseListed(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	sale := activity.Activity{Status: activity.Published, TotalStock: 30000, PerUserLimit: 1}
	listed := func(n int, ago time.Duration) []activity.UnrecordedOrder {
		us := make([]activity.UnrecordedOrder, n)
		for i := range us {
			us[i] = activity.UnrecordedOrder{No: "1-x", Since: now.Add(-ago), Units: 1, Known: true}
		}
		return us
	}
	// 13,100 waiting for minutes; 1,000 listed.
	backlog := activity.Live{Known: true, Status: activity.Published, Total: 30000, Remaining: 0,
		Unrecorded: 13100, Overdue: 13100, UnrecordedOrders: listed(1000, time.Minute), OldestUnrecorded: now.Add(-time.Minute)}
	r := activity.Reconcile(sale, backlog, 30000-13100, now)
	want := []string{"13100 orders have waited more than 5s for MySQL (the oldest since 2026-11-26T11:59:00Z)"}
	if r.State != activity.HasProblems || r.Pending != (activity.Pending{}) || !reflect.DeepEqual(r.Problems, want) {
		t.Errorf("a backlog of 13,100: state %s, pending %+v, problems %q; want problems %q and nothing pending", r.State, r.Pending, r.Problems, want)
	}
	// 2,000 overdue (1,000 listed), 1,500 within the grace (1,000 listed).
	busy := activity.Live{Known: true, Status: activity.Published, Total: 30000, Remaining: 30000 - 3500,
		Unrecorded: 3500, Overdue: 2000, UnrecordedOrders: append(listed(1000, time.Minute), listed(1000, time.Second)...),
		OldestUnrecorded: now.Add(-time.Minute)}
	r = activity.Reconcile(sale, busy, 0, now)
	if r.Pending != (activity.Pending{Orders: 1500, Units: 1000, Unread: 500}) || len(r.Problems) != 1 ||
		r.Problems[0] != "2000 orders have waited more than 5s for MySQL (the oldest since 2026-11-26T11:59:00Z)" {
		t.Errorf("2,000 overdue and 1,500 pending: pending %+v, problems %q", r.Pending, r.Problems)
	}
}
