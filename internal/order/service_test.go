package order_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// One user's 20 concurrent orders under a limit of 3: exactly 3 accepted,
// the rest LIMIT_EXCEEDED; and the per-user lock leaves nothing in Redis
// (no fence counter per user of the sale: it is taken WithoutFence).
func TestService_oneUsersConcurrentOrders_limitHeldAndNoUserLockKeysLeft(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 11, Type: activity.Seckill, TotalStock: 100, PerUserLimit: 3})
	ctx, rdb := context.Background(), sh.RDB
	svc := sh.Service(ordertest.NoTasks{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 11, UserID: 5, Quantity: 1})
			key := "ok"
			switch {
			case errors.Is(err, activity.ErrLimitExceeded):
				key = "limit"
			case err != nil:
				key = err.Error()
			}
			mu.Lock()
			answers[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers["ok"] != 3 || answers["limit"] != 17 {
		t.Fatalf("answers %v, want 3 ok and 17 limit", answers)
	}
	if keys := rdb.Keys(ctx, "*order-user*").Val(); len(keys) != 0 {
		t.Fatalf("per-user lock keys left behind: %v", keys)
	}
}

// Get reads Redis while it keeps an order and MySQL's record after, and
// only for the order's owner.
func TestService_get_fromRedisThenFromMySQL_onlyForTheOwner(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 21, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx := context.Background()
	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	records := mysqlstore.NewOrders(gdb)
	t.Cleanup(records.Close)
	svc := order.NewService(order.Deps{Store: sh.Store, Locks: redisstore.Locks{Locker: sh.Locks}, Tasks: ordertest.NoTasks{},
		Records: records, Log: ordertest.Log()}, order.Config{})

	placed, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 21, UserID: 4, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := svc.Get(ctx, placed.No, 4); err != nil || o.Persisted || o.Status != order.PendingPayment {
		t.Fatalf("from Redis: %+v, %v", o, err)
	}
	if err := records.Write(ctx, placed); err != nil {
		t.Fatal(err)
	}
	ordertest.DeleteOrder(t, sh.RDB, placed.No) // its retention in Redis is over
	if o, err := svc.Get(ctx, placed.No, 4); err != nil || !o.Persisted || o.No != placed.No || o.UserID != 4 {
		t.Fatalf("from MySQL: %+v, %v", o, err)
	}
	if _, err := svc.Get(ctx, placed.No, 5); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another user's order from MySQL: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, order.NewNo(21), 4); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("an order nobody has: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, "21-nope", 4); !errors.Is(err, order.ErrInvalid) {
		t.Fatalf("a malformed number: %v, want ErrInvalid", err)
	}
}

// A refusal says why in a message of its own, matched by its kind: the
// HTTP layer shows the message as it is.
func TestService_refusals_carryTheirKindAndMessage(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 22, Type: activity.Seckill, TotalStock: 1, PerUserLimit: 1},
		activity.Activity{ID: 23, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2, GroupTTL: time.Minute})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, o.No, 1); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		err  error
		kind error
		msg  string
	}{
		"pay a cancelled order": {func() error { _, err := svc.ConfirmPaid(ctx, o.No, "pi_test"); return err }(), order.ErrConflict, "the order is cancelled"},
		"quantity 0": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 0})
			return err
		}(), order.ErrInvalid, "quantity must be between 1 and 1000"},
		"bad Idempotency-Key": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 1, IdempotencyKey: "a b"})
			return err
		}(), order.ErrInvalid, "Idempotency-Key must be 1-64 printable ASCII characters"},
		"an order on a group buy": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 23, UserID: 1, Quantity: 1})
			return err
		}(), order.ErrWrongType, "a group buy's orders are placed by opening or joining a group"},
		"a group on a flash sale": {func() error {
			_, _, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 22, UserID: 2, Quantity: 1})
			return err
		}(), order.ErrWrongType, "groups are for group buys"},
		"a malformed order number": {func() error { _, err := svc.ConfirmPaid(ctx, "22-x", "pi_test"); return err }(), order.ErrInvalid,
			`order number "22-x" is malformed`},
	} {
		if !errors.Is(tc.err, tc.kind) || refusal.Message(tc.err, "") != tc.msg {
			t.Errorf("%s: %v; want kind %v, message %q", name, tc.err, tc.kind, tc.msg)
		}
	}
}

// Once this process saw a sale sell out it refuses it without Redis, but
// never a request with an Idempotency-Key: that may be the retry of an
// accepted order, and gets it back.
func TestService_refusedHere_afterSellingOut_butNotARetry(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 24, Type: activity.Seckill, TotalStock: 1, PerUserLimit: 1})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	if svc.RefusedHere(24, "") {
		t.Fatal("refused before anything sold")
	}
	first, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 1, Quantity: 1, IdempotencyKey: "tap-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.RefusedHere(24, "") || svc.RefusedHere(24, "tap-1") || svc.RefusedHere(25, "") {
		t.Fatal("after the last unit: want refused here without a key, not with one, not for another sale")
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 2, Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("an order after the sale sold out: %v", err)
	}
	again, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 1, Quantity: 1, IdempotencyKey: "tap-1"})
	if err != nil || again.No != first.No {
		t.Fatalf("the retry after the sale sold out: %+v, %v; want the first order %s", again, err, first.No)
	}
	// An app that sends a key with every tap: after the sell-out a new
	// key is refused from the key's read alone, not the order's script.
	before := testenv.ScriptCalls(t, sh.RDB)
	for i := range 20 {
		r := order.PlaceRequest{ActivityID: 24, UserID: int64(10 + i), Quantity: 1, IdempotencyKey: "tap-" + strconv.Itoa(i)}
		if _, err := svc.Place(ctx, r); !errors.Is(err, activity.ErrSoldOut) {
			t.Fatalf("a new key after the sell-out: %v, want sold out", err)
		}
	}
	if ran := testenv.ScriptCalls(t, sh.RDB) - before; ran != 0 {
		t.Fatalf("20 keyed taps after the sell-out ran %d scripts, want none", ran)
	}
}

// A replay (a request repeating an Idempotency-Key) of an order not yet
// in MySQL queues the order's tasks again: the first attempt may have
// failed before queueing them (a 503 for replicas that did not confirm in
// time, an api that died), and the order then waited for the reconciler.
// Once persisted, a replay queues nothing.
func TestService_replayOfAnOrderNotYetPersisted_queuesItsTasksAgain(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 38, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 5})
	ctx := context.Background()
	r := order.PlaceRequest{ActivityID: 38, UserID: 1, Quantity: 1, IdempotencyKey: "tap"}
	first, err := sh.Service(ordertest.NoTasks{}).Place(ctx, r) // its tasks lost
	if err != nil {
		t.Fatal(err)
	}
	tasks := &acceptedTasks{}
	svc := sh.Service(tasks)
	if again, err := svc.Place(ctx, r); err != nil || again.No != first.No {
		t.Fatalf("the replay: %+v, %v", again, err)
	}
	if len(tasks.nos) != 1 || tasks.nos[0] != first.No {
		t.Fatalf("the replay queued %v, want the order %s", tasks.nos, first.No)
	}
	if err := sh.RDB.ZRem(ctx, rediskeys.For(38).Outbox, first.No).Err(); err != nil { // persisted
		t.Fatal(err)
	}
	if _, err := svc.Place(ctx, r); err != nil || len(tasks.nos) != 1 {
		t.Fatalf("a replay of a persisted order: %v, queued %v; want nothing more", err, tasks.nos)
	}
}

// A group buy whose groups take the longest allowed time (7 days) keeps
// every record until well after anything can still act on it — the group's
// deadline, a member's payment time, the settlement's retries — and every
// key of the sale until retention after its last possible change.
func TestGroupBuy_sevenDayGroups_recordsOutliveTheDeadlineAndPayments(t *testing.T) {
	a := activity.Activity{ID: 31, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2,
		GroupTTL: activity.MaxGroupTTL, PaymentTTL: 15 * time.Minute}
	sh := ordertest.New(t, a)
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	g, o, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 31, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	k := rediskeys.For(31)
	settleBy := activity.MaxGroupTTL + 15*time.Minute // the deadline, then a last member's payment time
	if o.No == "" {
		t.Fatal("no order")
	}
	for _, key := range []string{k.Orders, k.Group(g.ID), k.GroupMembers(g.ID)} {
		if ttl := sh.RDB.PTTL(ctx, key).Val(); ttl < settleBy+activity.DefaultRetention-time.Minute {
			t.Errorf("%s is kept %v: gone before the group is settled and retention has passed (%v)", key, ttl,
				settleBy+activity.DefaultRetention)
		}
	}
	loaded := a // as ordertest loads it: on sale for an hour from an hour ago
	loaded.EndsAt = time.Now().Add(time.Hour)
	want := loaded.LiveUntil(activity.DefaultRetention)
	for _, key := range []string{k.Meta, k.Stock, k.Users, k.Orders, k.Outbox, k.Forming(), k.Unsettled(), k.Group(g.ID), k.GroupMembers(g.ID)} {
		at := time.UnixMilli(sh.RDB.PExpireTime(ctx, key).Val().Milliseconds())
		if d := at.Sub(want); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("%s expires at %v, want with the sale at %v", key, at, want)
		}
	}
}

// An expiry or a refund refused because the order carries a newer fence
// than the lock handed out is not "already moved on": Expire and Settle
// return the error, so the task is retried, and nothing changes meanwhile.
func TestService_staleRefusal_isRetriedNotDropped(t *testing.T) {
	sh := ordertest.New(t,
		activity.Activity{ID: 33, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1, PaymentTTL: 10 * time.Second},
		activity.Activity{ID: 34, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2, GroupTTL: time.Second})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	unpaid, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 33, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, paid, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 34, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ConfirmPaid(ctx, paid.No, "pi_test"); err != nil {
		t.Fatal(err)
	}
	// A fence above any the order lock will hand out (as after a fence
	// counter that went back), on both orders; and the unpaid order due.
	for _, no := range []string{unpaid.No, paid.No} {
		ordertest.SetOrder(t, sh.RDB, no, "fence", int64(1)<<62)
	}
	ordertest.SetOrder(t, sh.RDB, unpaid.No, "pay_by_ms", time.Now().Add(-time.Second).UnixMilli())
	time.Sleep(1100 * time.Millisecond) // the group's deadline passes

	if _, err := svc.Expire(ctx, unpaid.No); !errors.Is(err, order.ErrStale) {
		t.Fatalf("expiring with a stale fence: %v, want ErrStale (retried)", err)
	}
	if err := svc.Settle(ctx, paid.GroupID); !errors.Is(err, order.ErrStale) {
		t.Fatalf("settling with a stale fence: %v, want ErrStale (retried)", err)
	}
	for _, no := range []string{unpaid.No, paid.No} {
		if o, _ := sh.Store.Get(ctx, no); o.Status == order.Cancelled || o.Status == order.Refunded {
			t.Fatalf("%s moved to %s on a stale fence", no, o.Status)
		}
	}
	// The fences come right (the lock's counter passes them): the retries land.
	for _, no := range []string{unpaid.No, paid.No} {
		ordertest.SetOrder(t, sh.RDB, no, "fence", 0)
	}
	if _, err := svc.Expire(ctx, unpaid.No); err != nil {
		t.Fatal(err)
	}
	if err := svc.Settle(ctx, paid.GroupID); err != nil {
		t.Fatal(err)
	}
	if o, _ := sh.Store.Get(ctx, unpaid.No); o.Status != order.Cancelled {
		t.Fatalf("after the retry the unpaid order is %s", o.Status)
	}
	if o, _ := sh.Store.Get(ctx, paid.No); o.Status != order.Refunded {
		t.Fatalf("after the retry the paid member of the failed group is %s", o.Status)
	}
}

// Opening or joining a group with an Idempotency-Key is done once: a retry
// (say after a 503 whose request had in fact landed) gets the same group
// and order, and takes nothing more.
func TestService_groups_idempotencyKey_opensAndJoinsOnce(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 35, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 3,
		GroupSize: 3, GroupTTL: time.Minute})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	open := order.PlaceRequest{ActivityID: 35, UserID: 1, Quantity: 1, IdempotencyKey: "open-1"}
	g1, o1, err := svc.OpenGroup(ctx, open)
	if err != nil {
		t.Fatal(err)
	}
	g2, o2, err := svc.OpenGroup(ctx, open)
	if err != nil || g2.ID != g1.ID || o2.No != o1.No {
		t.Fatalf("the retry opened %s / %s (%v); want the first group %s and order %s", g2.ID, o2.No, err, g1.ID, o1.No)
	}
	join := order.PlaceRequest{UserID: 2, Quantity: 1, IdempotencyKey: "join-1"}
	j1, err := svc.JoinGroup(ctx, g1.ID, join)
	if err != nil {
		t.Fatal(err)
	}
	j2, err := svc.JoinGroup(ctx, g1.ID, join)
	if err != nil || j2.No != j1.No {
		t.Fatalf("the retried join: %s, %v; want %s", j2.No, err, j1.No)
	}
	// The same key names a different request on another endpoint: a key
	// that opened a group does not answer a join.
	if j3, err := svc.JoinGroup(ctx, g1.ID, order.PlaceRequest{UserID: 1, Quantity: 1, IdempotencyKey: "open-1"}); !errors.Is(err, order.ErrAlreadyMember) {
		t.Fatalf("joining with the key that opened: %+v, %v; want ALREADY_MEMBER, not the opening's order", j3, err)
	}
	v, _ := sh.Stock.Read(ctx, 35)
	g, _ := svc.GetGroup(ctx, g1.ID, 0)
	if v.Remaining != 8 || v.GroupsOpened != 1 || g.Members != 2 {
		t.Fatalf("after retries: %d left, %d groups opened, %d members; want 8, 1, 2", v.Remaining, v.GroupsOpened, g.Members)
	}
}

// The per-user lock is deferred to the accept (lock elision): when nobody
// holds it, the lock's check, the rate limit and the accept are one script
// and nothing of the lock is written; ORDER_USER_LOCK_HOLD's way
// (Config.HoldUserLock) takes it, two scripts. Either way an order waits
// for whoever holds the lock — here a holder through the same Locker —
// and is refused busy past LockWait, taking nothing.
func TestService_place_userLockDeferred_oneScriptWhenFree_waitsForAHolder(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 37, Type: activity.Seckill, TotalStock: 100, PerUserLimit: 100})
	ctx, rdb := context.Background(), sh.RDB
	scripts := func() int64 { return testenv.ScriptCalls(t, rdb) }
	place := func(svc *order.Service, ctx context.Context) error {
		_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 37, UserID: 9, Quantity: 1})
		return err
	}
	for _, c := range []struct {
		cfg     order.Config
		scripts int64
	}{{order.Config{UserRPS: 1000}, 1}, {order.Config{UserRPS: 1000, HoldUserLock: true}, 2}} {
		svc := order.NewService(sh.Deps(ordertest.NoTasks{}), c.cfg)
		if err := place(svc, ctx); err != nil { // loads the scripts
			t.Fatal(err)
		}
		before := scripts()
		if err := place(svc, ctx); err != nil {
			t.Fatal(err)
		}
		if n := scripts() - before; n != c.scripts {
			t.Errorf("HoldUserLock %v: %d scripts for an order, want %d", c.cfg.HoldUserLock, n, c.scripts)
		}
	}
	if keys := rdb.Keys(ctx, "*order-user*").Val(); len(keys) != 0 {
		t.Fatalf("per-user lock keys left behind: %v", keys)
	}

	// Another process (a lock client of its own) holds the user's lock, the
	// way lockUser names it. (One of this client's would queue the orders
	// at its local gate, never asking Redis whether the lock is free.)
	other := lock.New(rdb)
	defer other.Close()
	held, err := redisstore.Locks{Locker: other}.Obtain(ctx, "9", 5*time.Second,
		order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:37"})
	if err != nil {
		t.Fatal(err)
	}
	stockBefore := sh.RDB.Get(ctx, rediskeys.For(37).Stock).Val()
	impatient := order.NewService(sh.Deps(ordertest.NoTasks{}), order.Config{LockWait: 200 * time.Millisecond})
	if err := place(impatient, ctx); !errors.Is(err, order.ErrBusy) {
		t.Fatalf("an order while the lock is held, LockWait 200ms: %v, want ErrBusy", err)
	}
	if s := sh.RDB.Get(ctx, rediskeys.For(37).Stock).Val(); s != stockBefore {
		t.Fatalf("stock %s after a busy refusal, was %s", s, stockBefore)
	}
	done := make(chan error, 1)
	go func() { done <- place(sh.Service(ordertest.NoTasks{}), ctx) }()
	select {
	case err := <-done:
		t.Fatalf("an order went through while the lock was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if s := sh.RDB.Get(ctx, rediskeys.For(37).Stock).Val(); s != stockBefore {
		t.Fatalf("stock %s while the lock was held, was %s", s, stockBefore)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the order after the release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the order did not go through after the release")
	}
}
