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

// A sale of three items, restocked, made with the real order path,
// passes; each way of breaking it item by item fails the check it should,
// and only while broken.
func TestRun_items_passesASoundSale_andCatchesEachBreak(t *testing.T) {
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
	acts := mysqlstore.NewActivities(gdb)
	a := activity.Activity{Type: activity.Seckill, Name: "n", PerUserLimit: 3, StartsAt: time.Now().Add(-time.Hour),
		EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute, Status: activity.Published,
		Items: []activity.Item{{SKU: "R", PriceCents: 100, Stock: 3}, {SKU: "B", PriceCents: 80, Stock: 4, PerUserLimit: 2},
			{SKU: "G", PriceCents: 150, Stock: 1}}}
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	sh := ordertest.On(t, rdb)
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	ok := func(*activity.Activity) error { return nil }
	a, _, err = acts.ChangeStock(ctx, a.ID, "G", 2, ok, nil) // a restock: 3 of G
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	svc := sh.Service(ordertest.NoTasks{})
	rec := mysqlstore.NewOrders(gdb)
	t.Cleanup(rec.Close)
	var nos []string
	for _, p := range []struct {
		user int64
		qty  int
		sku  string
	}{{1, 2, "B"}, {1, 1, "G"}, {2, 3, "G"}, {2, 1, "R"}, {3, 1, "G"}} { // user 2's 3 of G: 2 left, refused
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: a.ID, UserID: p.user, Quantity: p.qty, Item: p.sku})
		if err != nil && p.user != 2 {
			t.Fatal(err)
		}
		if err == nil {
			if err := rec.Write(ctx, o); err != nil {
				t.Fatal(err)
			}
			nos = append(nos, o.No)
		}
	}
	run := func() invariants.Report {
		t.Helper()
		r, err := invariants.Run(ctx, rdb, db, a.ID, invariants.Options{Accepted: -1, ExpectPersisted: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run(); !r.OK() || r.Sold != 5 {
		t.Fatalf("a sound sale of items fails:\n%s", r)
	}
	k := rediskeys.For(a.ID)
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
		{"an item's units from nowhere in Redis",
			func() { rdb.HIncrBy(ctx, k.Items, "left:R", 1) }, func() { rdb.HIncrBy(ctx, k.Items, "left:R", -1) },
			[]string{"each item never oversold (Redis)"}},
		{"a restock the ledger does not record",
			func() { exec("UPDATE activity_items SET stock = stock + 5 WHERE activity_id = ? AND sku = 'R'", a.ID) },
			func() { exec("UPDATE activity_items SET stock = stock - 5 WHERE activity_id = ? AND sku = 'R'", a.ID) },
			[]string{"each item's stock is its ledger's", "each item never oversold (Redis)"}},
		{"an item's record with fewer units than it sold",
			func() {
				exec("UPDATE activity_items SET stock = 0, initial_stock = 0 WHERE activity_id = ? AND sku = 'R'", a.ID)
			},
			func() {
				exec("UPDATE activity_items SET stock = 3, initial_stock = 3 WHERE activity_id = ? AND sku = 'R'", a.ID)
			},
			[]string{"each item never oversold (Redis)", "each item never oversold, nobody over its limit (MySQL)"}},
		{"a user's count of an item unlike their orders",
			func() { rdb.HSet(ctx, k.ItemUsers, "9:B", 1) }, func() { rdb.HDel(ctx, k.ItemUsers, "9:B") },
			[]string{"nobody over an item's limit (Redis)"}},
		{"a user over an item's own limit",
			func() { exec("UPDATE activity_items SET per_user_limit = 1 WHERE activity_id = ? AND sku = 'B'", a.ID) },
			func() { exec("UPDATE activity_items SET per_user_limit = 2 WHERE activity_id = ? AND sku = 'B'", a.ID) },
			[]string{"nobody over an item's limit (Redis)", "each item never oversold, nobody over its limit (MySQL)"}},
		{"an order recorded of another item",
			func() { exec("UPDATE orders SET item_sku = 'R' WHERE order_no = ?", nos[0]) },
			func() { exec("UPDATE orders SET item_sku = 'B' WHERE order_no = ?", nos[0]) },
			[]string{"every order has its item and price (MySQL)"}},
		{"an order at another price",
			func() { exec("UPDATE orders SET price_cents = 1, amount_cents = 2 WHERE order_no = ?", nos[0]) },
			func() { exec("UPDATE orders SET price_cents = 80, amount_cents = 160 WHERE order_no = ?", nos[0]) },
			[]string{"every order has its item and price (MySQL)"}},
	} {
		tc.break_()
		r := run()
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
		if r := run(); !r.OK() {
			t.Fatalf("after fixing %s:\n%s", tc.name, r)
		}
	}
}

// LiveItems holds of a sale of items while it sells and is restocked (the
// total Redis's own), and fails the check it should when an item's units
// or the sale's stock break.
func TestLiveItems_holdsThroughARestock_andCatchesEachBreak(t *testing.T) {
	ctx := context.Background()
	a := activity.Activity{ID: 46, Type: activity.Seckill, PerUserLimit: 2,
		Items: []activity.Item{{SKU: "R", PriceCents: 100, Stock: 3}, {SKU: "B", PriceCents: 80, Stock: 4}}}
	sh := ordertest.New(t, a)
	svc := sh.Service(ordertest.NoTasks{})
	for u := int64(1); u <= 3; u++ {
		if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 46, UserID: u, Quantity: 1, Item: "R"}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want ...string) {
		t.Helper()
		r, err := invariants.LiveItems(ctx, sh.RDB, 46, 2)
		if err != nil {
			t.Fatal(err)
		}
		var failed []string
		for _, c := range r.Checks {
			if !c.OK {
				failed = append(failed, c.Name)
			}
		}
		if strings.Join(failed, ",") != strings.Join(want, ",") {
			t.Fatalf("failed %q, want %q\n%s", failed, want, r)
		}
	}
	check()
	a.SKU, a.PriceCents, a.TotalStock, a.Name, a.Status, a.Version = "", 0, 0, "n", activity.Published, 2
	a.Items[0].Stock = 8 // +5 of R
	a.Normalize()
	a.StartsAt, a.EndsAt, a.PaymentTTL = time.Now().Add(-time.Hour), time.Now().Add(time.Hour), time.Minute
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	check()
	k := rediskeys.For(46)
	sh.RDB.HIncrBy(ctx, k.Items, "left:B", 1)
	check("the items add up (live)")
	sh.RDB.HIncrBy(ctx, k.Items, "left:B", -1)
	sh.RDB.IncrBy(ctx, k.Stock, 1)
	check("never oversold (live)", "the items add up (live)")
}
