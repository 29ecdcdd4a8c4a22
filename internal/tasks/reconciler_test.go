package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func testLog(testing.TB) *slog.Logger { return ordertest.Log() }

// recorded is a Durable and a Recorder that remember what they were given.
func (*recorded) durable() {}

type recorded struct {
	mu      sync.Mutex
	syncs   []string
	expires []string
	settles []string
	groups  []string // SyncGroup calls
	written []string
	wrote   map[string]order.Status // the status each order was last written with
	// expireDown makes ExpireAt fail, as when Redis refuses the enqueue.
	expireDown bool
}

func (r *recorded) Sync(_ context.Context, no string, _ int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs = append(r.syncs, no)
	return nil
}

func (r *recorded) ExpireThenSync(ctx context.Context, no string, payBy time.Time) error {
	_ = r.ExpireAt(ctx, no, payBy)
	return r.Sync(ctx, no, 0)
}

func (r *recorded) ExpireAt(_ context.Context, no string, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expireDown {
		return errors.New("enqueue: connection refused")
	}
	r.expires = append(r.expires, no)
	return nil
}

func (r *recorded) SettleAt(_ context.Context, gid string, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settles = append(r.settles, gid)
	return nil
}

func (r *recorded) SyncGroup(_ context.Context, gid string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = append(r.groups, gid)
	return nil
}
func (r *recorded) WriteGroup(context.Context, order.Group) error { return nil }

func (r *recorded) WriteMany(ctx context.Context, os []order.Order) error {
	for _, o := range os {
		_ = r.Write(ctx, o)
	}
	return nil
}

func (r *recorded) Write(_ context.Context, o order.Order) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, o.No)
	if r.wrote == nil {
		r.wrote = map[string]order.Status{}
	}
	r.wrote[o.No] = o.Status
	return nil
}

// An API that dies between accepting an order and queueing its tasks leaves
// it in the outbox: the reconciler queues it, and writes it itself if it
// stays stuck.
func TestReconciler_findsAcceptedOrdersThatWereNeverQueued(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 9, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx, store := context.Background(), sh.Store
	acc, err := store.Accept(ctx, order.NewNo(9), order.PlaceRequest{ActivityID: 9, UserID: 1, Quantity: 1}, order.UserTurn{}) // accepted, then the API "died": nothing queued
	if err != nil {
		t.Fatal(err)
	}
	no := acc.Order.No

	tasks := &recorded{}
	r := NewReconciler(sh.Locks, store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{9}, nil }, ordertest.Log(), nil)
	r.Grace, r.StuckAfter = 0, time.Hour
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.syncs) != 1 || tasks.syncs[0] != no || len(tasks.expires) != 1 || len(tasks.written) != 0 {
		t.Fatalf("after the grace period: syncs %v, expires %v, written %v", tasks.syncs, tasks.expires, tasks.written)
	}

	r.StuckAfter = 0 // still not persisted: the queue is stuck
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.written) != 1 || tasks.written[0] != no {
		t.Fatalf("stuck order not written: %v", tasks.written)
	}
	if o, _ := store.Get(ctx, no); !o.Persisted {
		t.Fatal("written but not marked persisted")
	}
	if err := r.Pass(ctx); err != nil || len(tasks.written) != 1 {
		t.Fatalf("a persisted order was written again: %v, %v", tasks.written, err)
	}
}

// A change (a pay, say) goes back on the outbox until MySQL has it: an api
// that dies before its relay sends the change's sync task leaves it there,
// and the reconciler records it. A worker that read the order before the
// change and marks it persisted after does not take the change's entry off.
func TestReconciler_recordsChangesWhoseSyncWasLost(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 12, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx, store := context.Background(), sh.Store
	tasks := &recorded{} // queues nothing for real: every sync task is "lost"
	svc := sh.Service(tasks)
	unpersisted := func() []string {
		t.Helper()
		es, err := store.Unpersisted(ctx, 12, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var nos []string
		for _, e := range es {
			nos = append(nos, e.No)
		}
		return nos
	}

	placed, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 12, UserID: 7, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	no := placed.No
	read, _ := store.Get(ctx, no) // the worker records the new order
	if err := store.MarkPersisted(ctx, read); err != nil || len(unpersisted()) != 0 {
		t.Fatalf("a recorded order stays on the outbox: %v, %v", unpersisted(), err)
	}
	read, _ = store.Get(ctx, no)                                   // a late sync task reads it again ...
	if _, err := svc.ConfirmPaid(ctx, no, "pi_test"); err != nil { // ... the user pays ...
		t.Fatal(err)
	}
	if err := store.MarkPersisted(ctx, read); err != nil { // ... the worker wrote what it read
		t.Fatal(err)
	}
	if got := unpersisted(); len(got) != 1 || got[0] != no {
		t.Fatalf("after a pay the worker did not write, outbox %v, want [%s]", got, no)
	}
	if o, _ := store.Get(ctx, no); !o.Persisted || o.Status != order.Paid {
		t.Fatalf("order %+v, want paid and persisted (the row exists)", o)
	}

	r := NewReconciler(sh.Locks, store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{12}, nil }, ordertest.Log(), nil)
	r.Grace, r.StuckAfter = 0, 0
	money := &settled{}
	r.Payments = money
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.written) != 1 || tasks.written[0] != no || len(unpersisted()) != 0 {
		t.Fatalf("reconciler wrote %v, outbox now %v; want the paid order written and the outbox empty", tasks.written, unpersisted())
	}
	if len(money.orders) != 1 || money.orders[0] != no {
		t.Fatalf("the money of the orders the reconciler wrote settled for %v, want [%s] (the worker's sync would have)", money.orders, no)
	}
	if err := r.Pass(ctx); err != nil || len(tasks.written) != 1 {
		t.Fatalf("a recorded change was written again: %v, %v", tasks.written, err)
	}

	if tasks.wrote[no] != order.Paid {
		t.Fatalf("reconciler wrote %s as %q, want paid", no, tasks.wrote[no])
	}

	// A change of an order MySQL has not seen yet: its one entry is the
	// change's (the acceptance's is replaced, not kept beside it).
	fresh, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 12, UserID: 8, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, fresh.No, 8); err != nil {
		t.Fatal(err)
	}
	if got := unpersisted(); len(got) != 1 || got[0] != fresh.No {
		t.Fatalf("outbox %v, want one entry, for %s", got, fresh.No)
	}

	// An entry that outlived its order record (retention over) is dropped,
	// not retried on every pass.
	ordertest.DeleteOrder(t, sh.RDB, fresh.No)
	if err := r.Pass(ctx); err != nil || len(unpersisted()) != 0 {
		t.Fatalf("after a pass over an orphan entry: outbox %v, %v", unpersisted(), err)
	}
}

// An API that dies between opening a group and queueing its settle task
// leaves a group nobody would settle: the reconciler queues the settlement
// once the deadline is past, and stops once the group is settled.
func TestReconciler_settlesGroupsWhoseSettleTaskWasNeverQueued(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 7, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1,
		GroupSize: 3, GroupTTL: 300 * time.Millisecond})
	ctx, rdb, store := context.Background(), sh.RDB, sh.Store
	gid := order.NewNo(7)
	if _, err := store.OpenGroup(ctx, gid, order.NewNo(7), order.PlaceRequest{ActivityID: 7, UserID: 1, Quantity: 1}); err != nil {
		t.Fatal(err) // opened, then the API "died": no settle task
	}
	gone := order.NewNo(7)
	if err := rdb.ZAdd(ctx, rediskeys.For(7).Unsettled(), redis.Z{Score: 1, Member: gone}).Err(); err != nil {
		t.Fatal(err) // an entry whose group records expired
	}

	tasks := &recorded{}
	r := NewReconciler(sh.Locks, store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{7}, nil }, ordertest.Log(), nil)
	r.Grace = 0
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.settles) != 0 {
		t.Fatalf("settled before the deadline: %v", tasks.settles)
	}
	time.Sleep(400 * time.Millisecond)
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.settles) != 1 || tasks.settles[0] != gid {
		t.Fatalf("after the deadline: settles %v, want [%s]", tasks.settles, gid)
	}
	if n := rdb.ZScore(ctx, rediskeys.For(7).Unsettled(), gone).Err(); n != redis.Nil {
		t.Fatalf("an entry without a group was kept: %v", n)
	}
	if status, _, err := store.FailIfDue(ctx, gid); err != nil || status != order.Failed {
		t.Fatalf("settle: %v, %v", status, err)
	}
	if err := r.Pass(ctx); err != nil || len(tasks.settles) != 1 {
		t.Fatalf("a settled group was queued again: %v, %v", tasks.settles, err)
	}
}

// A group that succeeds before its deadline stays unsettled until then: if
// the api died before queueing the row's sync (and the settle task was lost
// too), the reconciler settles it after the deadline, and settling records
// the succeeded group's row.
func TestReconciler_succeededGroupWhoseSyncWasLost_recordedAfterItsDeadline(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 15, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1,
		GroupSize: 2, GroupTTL: 500 * time.Millisecond})
	ctx := context.Background()
	tasks := &recorded{} // every task "lost"
	svc := sh.Service(tasks)
	g, first, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 15, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	second, err := svc.JoinGroup(ctx, g.ID, order.PlaceRequest{UserID: 2, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []order.Order{first, second} {
		if _, err := svc.ConfirmPaid(ctx, o.No, "pi_test"); err != nil {
			t.Fatal(err)
		}
	}
	if view, err := svc.GetGroup(ctx, g.ID, 1); err != nil || view.Status != order.Succeeded {
		t.Fatalf("group after both paid: %+v, %v", view, err)
	}

	r := NewReconciler(sh.Locks, sh.Store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{15}, nil }, ordertest.Log(), nil)
	r.Grace = 0
	time.Sleep(600 * time.Millisecond) // past the deadline
	settles := len(tasks.settles)      // OpenGroup's own, "lost"
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tasks.settles[settles:]; fmt.Sprint(got) != fmt.Sprint([]string{g.ID}) {
		t.Fatalf("the reconciler queued settles %v, want the succeeded group %s", got, g.ID)
	}
	before := len(tasks.groups)
	if err := svc.Settle(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if len(tasks.groups) != before+1 || tasks.groups[before] != g.ID {
		t.Fatalf("settling the succeeded group queued group syncs %v, want its row recorded", tasks.groups[before:])
	}
	if n := sh.RDB.ZCard(ctx, rediskeys.For(15).Unsettled()).Val(); n != 0 {
		t.Fatalf("%d groups unsettled after the settle", n)
	}
}

// An unpaid order whose payment timeout cannot be queued stays on the
// outbox, neither synced nor written, until a later pass queues the
// timeout: taking it off first would leave it holding its units for ever.
func TestReconciler_timeoutNotQueued_orderStaysOnTheOutbox(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 16, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx := context.Background()
	acc, err := sh.Store.Accept(ctx, order.NewNo(16), order.PlaceRequest{ActivityID: 16, UserID: 1, Quantity: 1}, order.UserTurn{})
	if err != nil {
		t.Fatal(err)
	}
	tasks := &recorded{expireDown: true}
	r := NewReconciler(sh.Locks, sh.Store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{16}, nil }, testLog(t), nil)
	r.Grace = 0
	for _, stuck := range []time.Duration{time.Hour, 0} { // queue it again, then write it
		r.StuckAfter = stuck
		if err := r.Pass(ctx); err == nil {
			t.Fatal("a pass whose enqueue failed reported no error")
		}
		if len(tasks.syncs) != 0 || len(tasks.written) != 0 {
			t.Fatalf("without its timeout the order was synced %v or written %v", tasks.syncs, tasks.written)
		}
		if es, _ := sh.Store.Unpersisted(ctx, 16, 0, 10); len(es) != 1 || es[0].No != acc.Order.No {
			t.Fatalf("outbox %v, want the order still on it", es)
		}
	}
	tasks.expireDown = false
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tasks.expires) != 1 || len(tasks.written) != 1 {
		t.Fatalf("once queueing works: expires %v, written %v", tasks.expires, tasks.written)
	}
	if es, _ := sh.Store.Unpersisted(ctx, 16, 0, 10); len(es) != 0 {
		t.Fatalf("outbox %v after the timeout was queued and the order written", es)
	}
}

// settled records the orders whose money was settled (Payments).
type settled struct{ orders []string }

func (s *settled) Settle(_ context.Context, o order.Order) error {
	s.orders = append(s.orders, o.No)
	return nil
}

// An unpaid order persisted and off its outbox whose payment timeout task
// was lost (a failover dropped the scheduled task the old primary alone
// held; seen in the network soak) is found by the sweep of MySQL's pending
// orders once its payment time is past by the grace period, and its
// timeout queued again. One still in its time, one that changed (its
// sync on the outbox) and one whose record is gone are left alone.
func TestReconciler_persistedUnpaidOrderPastItsTime_timeoutQueuedAgain(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 17, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx, store := context.Background(), sh.Store
	svc := sh.Service(ordertest.NoTasks{}) // every task "lost"
	place := func(user int64) string {
		t.Helper()
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 17, UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		read, _ := store.Get(ctx, o.No)
		if err := store.MarkPersisted(ctx, read); err != nil { // the worker recorded it
			t.Fatal(err)
		}
		return o.No
	}
	late, inTime, cancelled := place(1), place(2), place(3)
	past := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	if _, err := svc.Cancel(ctx, cancelled, 3); err != nil {
		t.Fatal(err)
	}
	ordertest.SetOrder(t, sh.RDB, late, "pay_by_ms", past)
	ordertest.SetOrder(t, sh.RDB, cancelled, "pay_by_ms", past)
	gone := order.NewNo(17)

	tasks := &recorded{}
	var asked []int64
	r := NewReconciler(sh.Locks, store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{17}, nil }, testLog(t), nil)
	r.Grace, r.StuckAfter = 10*time.Second, time.Hour
	r.Pending = func(_ context.Context, id int64, before time.Time, limit int) ([]string, error) {
		asked = append(asked, id)
		if time.Until(before) > -r.Grace+time.Second || limit <= 0 {
			t.Errorf("Pending(%d, %v, %d): want orders older than the grace period", id, before, limit)
		}
		return []string{late, inTime, cancelled, gone}, nil // as MySQL has them: all pending
	}
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != 17 {
		t.Fatalf("Pending asked for %v, want [17]", asked)
	}
	if len(tasks.expires) != 1 || tasks.expires[0] != late {
		t.Fatalf("timeouts queued %v, want [%s] (only the unpaid order past its time)", tasks.expires, late)
	}
	if got := testutil.ToFloat64(r.unexpired.WithLabelValues("17")); got != 1 {
		t.Fatalf("flashsale_orders_timeout_requeued_total{activity=17} = %v, want 1", got)
	}

	// Run, the timeout cancels it and returns its unit; the next pass finds
	// nothing more to queue.
	if _, err := svc.Expire(ctx, late); err != nil {
		t.Fatal(err)
	}
	if o, _ := store.Get(ctx, late); o.Status != order.Cancelled {
		t.Fatalf("the late order after its timeout ran: %s, want cancelled", o.Status)
	}
	if err := r.Pass(ctx); err != nil || len(tasks.expires) != 1 {
		t.Fatalf("the next pass: %v, timeouts %v; want none more", err, tasks.expires)
	}

	r.Pending = func(context.Context, int64, time.Time, int) ([]string, error) {
		return nil, errors.New("mysql: connection refused")
	}
	if err := r.Pass(ctx); err == nil {
		t.Fatal("a pass whose sweep could not read MySQL reported no error")
	}
}

// flashsale_orders_unpersisted counts every entry past the grace, not the
// 1,000 a pass looks at (issue 39: the figures stopped at 1,000). 1,500
// entries waited a minute (orders whose records are gone): the gauge says
// 1,500 after the first pass, which drops 1,000 of them, and 500 after the
// second.
func TestReconciler_unpersistedGauge_countsPastTheThousandAPassTakes(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 18, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx := context.Background()
	old := float64(time.Now().Add(-time.Minute).UnixMilli())
	zs := make([]redis.Z, 1500)
	for i := range zs {
		zs[i] = redis.Z{Score: old, Member: order.NewNo(18)}
	}
	if err := sh.RDB.ZAdd(ctx, rediskeys.For(18).Outbox, zs...).Err(); err != nil {
		t.Fatal(err)
	}
	tasks := &recorded{}
	r := NewReconciler(sh.Locks, sh.Store, tasks, tasks, func(context.Context) ([]int64, error) { return []int64{18}, nil }, testLog(t), nil)
	for pass, want := range []float64{1500, 500} {
		if err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(r.unpersisted.WithLabelValues("18")); got != want {
			t.Fatalf("pass %d: flashsale_orders_unpersisted %v, want %v", pass+1, got, want)
		}
	}
}
