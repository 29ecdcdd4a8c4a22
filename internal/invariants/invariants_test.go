package invariants_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A sale made with the real order path passes; each way of breaking it fails
// the check it should, and only while broken.
func TestRun_passesASoundSale_andCatchesEachBreak(t *testing.T) {
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
	svc := sh.Service(ordertest.NoTasks{}) // this test writes MySQL itself
	rec := mysqlstore.NewOrders(gdb)
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
