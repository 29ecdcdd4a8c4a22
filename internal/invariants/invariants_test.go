package invariants_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// liveSale is a flash sale of 10 units, 2 a user, on for an hour, in a
// fresh MySQL (migrated) and its own redis-server: its record, and the
// shop that sells it.
func liveSale(t *testing.T) (*redis.Client, *gorm.DB, *sql.DB, activity.Activity, *ordertest.Shop) {
	t.Helper()
	ctx := context.Background()
	rdb := testenv.StartRedis(t).Client(t)
	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	a := activity.Activity{Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 10, PerUserLimit: 2,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute, Status: activity.Published}
	if err := mysqlstore.NewActivities(gdb).Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	sh := ordertest.On(t, rdb)
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	return rdb, gdb, db, a, sh
}

// A sale made with the real order path passes; each way of breaking it fails
// the check it should, and only while broken.
func TestRun_passesASoundSale_andCatchesEachBreak(t *testing.T) {
	ctx := context.Background()
	rdb, gdb, db, a, sh := liveSale(t)
	svc := sh.Service(ordertest.NoTasks{}) // this test writes MySQL itself
	rec := mysqlstore.NewOrders(gdb)
	t.Cleanup(rec.Close)
	var nos []string
	for _, p := range []struct{ user, qty int64 }{{1, 2}, {2, 1}, {3, 1}} {
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: a.ID, UserID: p.user, Quantity: int(p.qty)})
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Write(ctx, o); err != nil {
			t.Fatal(err)
		}
		nos = append(nos, o.No)
	}

	run := func(opt invariants.Options) invariants.Report {
		t.Helper()
		r, err := invariants.Run(ctx, rdb, db, a.ID, opt)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	strict := invariants.Options{Accepted: 3, ExpectPersisted: true}
	if r := run(strict); !r.OK() || r.Sold != 4 || r.Orders != 3 {
		t.Fatalf("a sound sale fails:\n%s", r)
	}

	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		opt         invariants.Options
		break_, fix func()
		want        []string // the checks that must fail, all others pass
	}{
		{"units from nowhere in Redis", strict,
			func() { rdb.Set(ctx, rediskeys.For(a.ID).Stock, 7, 0) }, func() { rdb.Set(ctx, rediskeys.For(a.ID).Stock, 6, 0) },
			[]string{"never oversold (Redis)"}},
		{"more sold than the total", strict,
			func() { exec("UPDATE activities SET total_stock = 3 WHERE id = ?", a.ID) },
			func() { exec("UPDATE activities SET total_stock = 10 WHERE id = ?", a.ID) },
			[]string{"never oversold (Redis)", "never oversold (MySQL)"}},
		{"a user over the limit", strict,
			func() { exec("UPDATE activities SET per_user_limit = 1 WHERE id = ?", a.ID) },
			func() { exec("UPDATE activities SET per_user_limit = 2 WHERE id = ?", a.ID) },
			[]string{"nobody over the limit (Redis)", "nobody over the limit (MySQL)"}},
		{"a user's count unlike their orders", strict,
			func() { rdb.HSet(ctx, rediskeys.For(a.ID).Users, "9", 1) }, func() { rdb.HDel(ctx, rediskeys.For(a.ID).Users, "9") },
			[]string{"nobody over the limit (Redis)"}},
		{"an accepted order missing from MySQL", strict,
			func() { exec("DELETE FROM orders WHERE order_no = ?", nos[1]) },
			func() { o, _ := sh.Store.Get(ctx, nos[1]); _ = rec.Write(ctx, o) },
			[]string{"every accepted order in MySQL exactly once", "Redis and MySQL agree"}},
		{"missing, but persistence not awaited", invariants.Options{Accepted: -1},
			func() { exec("DELETE FROM orders WHERE order_no = ?", nos[1]) },
			func() { o, _ := sh.Store.Get(ctx, nos[1]); _ = rec.Write(ctx, o) },
			nil},
		{"a MySQL order never accepted", strict,
			func() {
				exec("INSERT INTO orders (order_no, activity_id, user_id, quantity, price_cents, amount_cents, status, fence, created_at, updated_at) "+
					"VALUES ('x', ?, 5, 1, 1, 1, 'cancelled', 0, NOW(), NOW())", a.ID)
			},
			func() { exec("DELETE FROM orders WHERE order_no = 'x'") },
			[]string{"every accepted order in MySQL exactly once"}},
		{"a status that differs", strict,
			func() { exec("UPDATE orders SET status = 'cancelled' WHERE order_no = ?", nos[0]) },
			func() { exec("UPDATE orders SET status = 'pending_payment' WHERE order_no = ?", nos[0]) },
			[]string{"Redis and MySQL agree"}},
		{"a 202 with no order", invariants.Options{Accepted: 4, ExpectPersisted: true}, func() {}, func() {},
			[]string{"every 202 answer is an order"}},
	} {
		tc.break_()
		r := run(tc.opt)
		var failed []string
		for _, c := range r.Checks {
			if !c.OK {
				failed = append(failed, c.Name)
			}
		}
		if strings.Join(failed, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: failed %q, want %q\n%s", tc.name, failed, tc.want, r)
		}
		tc.fix()
		if r := run(strict); !r.OK() {
			t.Fatalf("after fixing %s:\n%s", tc.name, r)
		}
	}
}

// Live holds at every instant of a sale while orders are placed and
// cancelled around it (each snapshot is one MULTI), and fails the check it
// should when the stock or a user's units break.
func TestLive_holdsWhileOrdersFlow_andCatchesEachBreak(t *testing.T) {
	ctx := context.Background()
	const id, total, limit = 41, 40, 2
	sh := ordertest.New(t, activity.Activity{ID: id, Type: activity.Seckill, TotalStock: total, PerUserLimit: limit})
	svc := sh.Service(ordertest.NoTasks{})
	live := func(limit int64) invariants.Report {
		t.Helper()
		r, err := invariants.Live(ctx, sh.RDB, id, total, limit)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Eight shoppers place and cancel for half a second (the sale sells out
	// and restocks over and over) while Live checks as fast as it can.
	stop := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for u := range int64(8) {
		wg.Go(func() {
			for time.Now().Before(stop) {
				o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 100 + u, Quantity: 1 + int(u%2)})
				if err == nil && u%4 != 0 { // every fourth shopper keeps their orders
					_, _ = svc.Cancel(ctx, o.No, 100+u)
				}
			}
		})
	}
	checks := 0
	for time.Now().Before(stop) {
		if r := live(limit); !r.OK() {
			t.Fatalf("mid-sale snapshot %d fails:\n%s", checks, r)
		}
		checks++
	}
	wg.Wait()
	if r := live(limit); !r.OK() || r.Sold == 0 || checks < 20 {
		t.Fatalf("after the flow (%d snapshots checked, want 20+), held %d:\n%s", checks, r.Sold, r)
	}

	k := rediskeys.For(id)
	left, _ := sh.RDB.Get(ctx, k.Stock).Int64()
	for _, tc := range []struct {
		name        string
		limit       int64
		break_, fix func()
		want        []string
	}{
		{"units from nowhere", limit,
			func() { sh.RDB.IncrBy(ctx, k.Stock, 1) }, func() { sh.RDB.IncrBy(ctx, k.Stock, -1) },
			[]string{"never oversold (live)"}},
		{"a negative stock", limit,
			func() { sh.RDB.Set(ctx, k.Stock, -1, 0) }, func() { sh.RDB.Set(ctx, k.Stock, left, 0) },
			[]string{"never oversold (live)"}},
		{"a user over the limit, stock taken for it", limit,
			func() { sh.RDB.IncrBy(ctx, k.Stock, -3); sh.RDB.HSet(ctx, k.Users, "9", 3) },
			func() { sh.RDB.IncrBy(ctx, k.Stock, 3); sh.RDB.HDel(ctx, k.Users, "9") },
			[]string{"nobody over the limit (live)"}},
		{"a holder of nothing left behind", limit,
			func() { sh.RDB.HSet(ctx, k.Users, "9", 0) }, func() { sh.RDB.HDel(ctx, k.Users, "9") },
			[]string{"nobody over the limit (live)"}},
		{"holders of two under a limit of one", 1, func() {}, func() {},
			[]string{"nobody over the limit (live)"}},
	} {
		tc.break_()
		if got := failed(live(tc.limit)); got != strings.Join(tc.want, ",") {
			t.Errorf("%s: failed %q, want %q", tc.name, got, tc.want)
		}
		tc.fix()
		if r := live(limit); !r.OK() {
			t.Fatalf("after fixing %s:\n%s", tc.name, r)
		}
	}
}

// A settled group buy made with the real order path — a group that
// succeeded, one that failed with a paid and an unpaid member, one that
// failed with its leader unpaid — passes Settled (and Run); each way of
// breaking a settlement fails the check it should, and only while broken.
func TestSettled_passesASettledGroupBuy_andCatchesEachBreak(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.StartRedis(t).Client(t)
	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	a := activity.Activity{Type: activity.GroupBuy, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 10, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute,
		GroupSize: 2, GroupTTL: 400 * time.Millisecond, Status: activity.Published}
	if err := mysqlstore.NewActivities(gdb).Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	sh := ordertest.On(t, rdb)
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	svc := sh.Service(ordertest.NoTasks{}) // this test writes MySQL itself
	no := map[int64]string{}               // user -> order
	open := func(user int64) string {
		t.Helper()
		g, o, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: a.ID, UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		no[user] = o.No
		return g.ID
	}
	join := func(gid string, user int64) {
		t.Helper()
		o, err := svc.JoinGroup(ctx, gid, order.PlaceRequest{UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		no[user] = o.No
	}
	// The provider's payments, as the worker records them (this test is
	// the worker): confirmed, and given back when the order is refunded.
	payRecs := mysqlstore.NewPayments(gdb)
	payment := func(user int64) payment.Payment {
		return payment.Payment{ID: "pi_test_" + strconv.FormatInt(user, 10), Provider: "simulated", OrderNo: no[user],
			ActivityID: a.ID, AmountCents: 100, Currency: "cny", Status: payment.Succeeded}
	}
	pay := func(user int64) {
		t.Helper()
		if _, err := svc.ConfirmPaid(ctx, no[user], payment(user).ID); err != nil {
			t.Fatal(err)
		}
		if err := payRecs.WritePayment(ctx, payment(user)); err != nil {
			t.Fatal(err)
		}
		if _, err := redisstore.NewPayments(rdb).SavePayment(ctx, payment(user)); err != nil { // the api's live record
			t.Fatal(err)
		}
	}
	won, lost, empty := open(1), open(3), open(5)
	join(won, 2)
	join(lost, 4)
	pay(1)
	pay(2)
	pay(3)
	time.Sleep(a.GroupTTL + 100*time.Millisecond)
	rec := mysqlstore.NewOrders(gdb)
	t.Cleanup(rec.Close)
	for _, gid := range []string{won, lost, empty} {
		if err := svc.Settle(ctx, gid); err != nil {
			t.Fatal(err)
		}
		g, err := sh.Store.GetGroup(ctx, gid)
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.WriteGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	for user, n := range no {
		o, err := sh.Store.Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Write(ctx, o); err != nil {
			t.Fatal(err)
		}
		if o.Status == order.Refunded {
			p := payment(user)
			p.RefundID = "re_" + p.ID
			if err := payRecs.WritePayment(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}

	settled := func() invariants.Report {
		t.Helper()
		r, err := invariants.Settled(ctx, rdb, db, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := settled()
	if !r.OK() || r.Groups["succeeded"] != 1 || r.Groups["failed"] != 2 ||
		r.Statuses["paid"] != 2 || r.Statuses["refunded"] != 1 || r.Statuses["cancelled"] != 2 {
		t.Fatalf("a sound settlement fails or miscounts:\n%s", r)
	}
	// SettledRedis: the same, but MySQL's group rows (no MySQL at hand)
	// and checkMoney's seven checks (payments live in MySQL).
	const moneyChecks = 7
	settledRedis := func() invariants.Report {
		t.Helper()
		r, err := invariants.SettledRedis(ctx, rdb, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if rr := settledRedis(); !rr.OK() || len(rr.Checks) != len(r.Checks)-1-moneyChecks || rr.Total != 10 || rr.Limit != 1 || rr.Groups["failed"] != 2 {
		t.Fatalf("SettledRedis of a sound settlement:\n%s", rr)
	}
	if r, err := invariants.Run(ctx, rdb, db, a.ID, invariants.Options{Accepted: 5, ExpectPersisted: true}); err != nil || !r.OK() {
		t.Fatalf("Run on the settled group buy: %v\n%s", err, r)
	}

	k := rediskeys.For(a.ID)
	set := func(user int64, fields ...any) { ordertest.SetOrder(t, rdb, no[user], fields...) }
	returned := func(n int64) { rdb.HIncrBy(ctx, k.Meta, "returned", n) }
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		break_, fix func()
		want        []string
	}{
		{"a failed group's paid member never refunded",
			func() { set(3, "status", "paid"); returned(-1) }, func() { set(3, "status", "refunded"); returned(1) },
			[]string{"failed groups: every paid member refunded"}},
		{"a failed group's unpaid member left pending",
			func() { set(4, "status", "pending_payment"); returned(-1) }, func() { set(4, "status", "cancelled"); returned(1) },
			[]string{"failed groups: every unpaid member cancelled"}},
		{"an order record that does not read as an order",
			func() { set(5, "qty", "x") }, func() { set(5, "qty", 1) },
			[]string{"every order record well formed"}},
		{"a refund counted twice", func() { returned(1) }, func() { returned(-1) },
			[]string{"units returned exactly once"}},
		{"an acceptance without its record",
			func() { rdb.HIncrBy(ctx, k.Meta, "accepted", 1) }, func() { rdb.HIncrBy(ctx, k.Meta, "accepted", -1) },
			[]string{"every acceptance one order record"}},
		{"an unpaid order past its pay-by",
			func() { set(5, "status", "pending_payment", "pay_by_ms", 1); returned(-1) },
			func() { set(5, "status", "cancelled"); returned(1) },
			[]string{"no unpaid order past its pay-by", "failed groups: every unpaid member cancelled"}},
		{"a succeeded group with a place unpaid",
			func() { set(2, "status", "pending_payment") }, func() { set(2, "status", "paid") },
			[]string{"succeeded groups: every place paid", "every group's payments counted once"}},
		{"a failed group's payment counted twice",
			func() { rdb.HIncrBy(ctx, k.Group(lost), "paid", 1) }, func() { rdb.HIncrBy(ctx, k.Group(lost), "paid", -1) },
			[]string{"every group's payments counted once"}},
		{"a group with more members than places",
			func() { rdb.HIncrBy(ctx, k.Group(lost), "members", 1) }, func() { rdb.HIncrBy(ctx, k.Group(lost), "members", -1) },
			[]string{"no group over its size"}},
		{"a group left unsettled after its deadline",
			func() { rdb.ZAdd(ctx, k.Unsettled(), redis.Z{Score: 1, Member: won}) }, func() { rdb.ZRem(ctx, k.Unsettled(), won) },
			[]string{"every group settled after its deadline"}},
		{"a group still forming after its deadline",
			func() { rdb.HSet(ctx, k.Group(empty), "status", "forming") }, func() { rdb.HSet(ctx, k.Group(empty), "status", "failed") },
			[]string{"every group settled after its deadline", "every group in MySQL with Redis's status"}},
		{"MySQL's row of a failed group says forming",
			func() { exec("UPDATE `groups` SET status = 'forming' WHERE group_id = ?", lost) },
			func() { exec("UPDATE `groups` SET status = 'failed' WHERE group_id = ?", lost) },
			[]string{"every group in MySQL with Redis's status"}},
		{"a group missing from MySQL",
			func() { exec("DELETE FROM `groups` WHERE group_id = ?", won) },
			func() { g, _ := sh.Store.GetGroup(ctx, won); _ = rec.WriteGroup(ctx, g) },
			[]string{"every group in MySQL with Redis's status"}},
	} {
		tc.break_()
		if got := failed(settled()); got != strings.Join(tc.want, ",") {
			t.Errorf("%s: failed %q, want %q\n%s", tc.name, got, tc.want, settled())
		}
		var inRedis []string
		for _, w := range tc.want {
			if w != "every group in MySQL with Redis's status" {
				inRedis = append(inRedis, w)
			}
		}
		if got := failed(settledRedis()); got != strings.Join(inRedis, ",") {
			t.Errorf("%s: SettledRedis failed %q, want %q\n%s", tc.name, got, inRedis, settledRedis())
		}
		tc.fix()
		if r := settled(); !r.OK() {
			t.Fatalf("after fixing %s:\n%s", tc.name, r)
		}
	}
}

// failed names r's failed checks, in order, comma-separated.
func failed(r invariants.Report) string {
	var names []string
	for _, c := range r.Checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ",")
}
