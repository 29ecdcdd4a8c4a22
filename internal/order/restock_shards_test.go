package order_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/stock"
)

// A sharded sale restocked: the units added go to shard 0 and no unit is
// stranded — users of the other shards, sold out, buy them (their shards
// pull); units removed are taken wherever they are unsold (pulled into
// shard 0 first), never more than are unsold; every shard's books add up.
func TestShards_restocked_addedUnitsReachEveryShard_removalsPullFirst(t *testing.T) {
	ctx := context.Background()
	const act, shards = 150, 3
	a := activity.Activity{ID: act, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 6,
		PerUserLimit: 1, Shards: shards, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTTL: time.Minute, Status: activity.Published, Version: 1}
	sh := ordertest.New(t)
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	// No local sold-out flag: this is about the shards' units (the flags
	// are let go by the restock notice: internal/app's items tests).
	d := sh.Deps(ordertest.NoTasks{})
	d.SoldOut = nil
	svc := order.NewService(d, order.Config{})
	users := ordertest.UsersIn(30, shards, func(s int) bool { return s == 2 }) // all of shard 2
	if got := ordertest.PlaceAll(t, svc, act, users[:10]); got["ok"] != 6 || got["sold out"] != 4 {
		t.Fatalf("6 units, 10 users: %v", got)
	}
	// +4: MySQL's total 10, at version 2, carried by the load.
	a.TotalStock, a.Version = 10, 2
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := ordertest.PlaceAll(t, svc, act, users[10:20]); got["ok"] != 4 || got["sold out"] != 6 {
		t.Fatalf("4 units restocked, 10 users of shard 2: %v", got)
	}
	ordertest.CheckShards(t, sh.RDB, act, shards, 10, 1)

	// +6 (version 3), 2 of them bought by shard 2's users (pulled there),
	// then 3 removed at version 3: from shard 0 and what shard 2 pulled.
	a.TotalStock, a.Version = 16, 3
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := ordertest.PlaceAll(t, svc, act, users[20:22]); got["ok"] != 2 {
		t.Fatalf("2 users of shard 2 after +6: %v", got)
	}
	if _, err := sh.Stock.Take(ctx, a, "s", 5); !errors.Is(err, stock.ErrShort) {
		t.Fatalf("5 of the 4 unsold: %v", err)
	}
	if _, err := sh.Stock.Take(ctx, a, "s", 3); err != nil {
		t.Fatalf("3 of the 4 unsold, wherever they are: %v", err)
	}
	a.TotalStock, a.Version = 13, 4 // the removal recorded, and loaded
	if _, err := sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := ordertest.PlaceAll(t, svc, act, users[22:30]); got["ok"] != 1 || got["sold out"] != 7 {
		t.Fatalf("the last unit, 8 users: %v", got)
	}
	if sold := ordertest.CheckShards(t, sh.RDB, act, shards, 13, 1); sold != 13 {
		t.Fatalf("%d sold of 13", sold)
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: act, UserID: 999_999, Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("after the last unit: %v", err)
	}
}

// A sharded sale's orders naming its item: a shard's last unit sold is not
// the item's, so the item is not refused locally while other shards hold
// units (the order pulls them); once every shard is empty it is.
func TestShards_ordersNamingTheItem_aShardsLastUnitIsNotTheItems(t *testing.T) {
	ctx := context.Background()
	sh := ordertest.New(t, activity.Activity{ID: 151, Type: activity.Seckill, TotalStock: 6, PerUserLimit: 1, Shards: 3})
	svc := sh.Service(ordertest.NoTasks{})
	users := ordertest.UsersIn(7, 3, func(s int) bool { return s == 1 }) // shard 1 holds 2 of the 6
	for i, u := range users[:6] {
		if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 151, UserID: u, Quantity: 1, Item: "s"}); err != nil {
			t.Fatalf("order %d of 6 (shard 1's units gone after 2): %v", i+1, err)
		}
		if i < 5 && (sh.Stock.ItemSoldOut(151, "s") || sh.Stock.SoldOut(151)) {
			t.Fatalf("after order %d of 6, the item is refused locally", i+1)
		}
	}
	_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 151, UserID: users[6], Quantity: 1, Item: "s"})
	if !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("the 7th: %v, want sold out", err)
	}
}
