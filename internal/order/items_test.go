package order_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/refusal"
)

// phones is a sale of three items, one per user across them (2), and one
// blue of its own.
var phones = activity.Activity{ID: 40, Type: activity.Seckill, PerUserLimit: 2, Items: []activity.Item{
	{SKU: "RED", PriceCents: 1000, Stock: 3}, {SKU: "BLUE", PriceCents: 800, Stock: 5, PerUserLimit: 1},
	{SKU: "GOLD", PriceCents: 1500, Stock: 1}}}

// An order names its item and pays its price; a sale of several items
// refuses an order naming none, or one it does not sell, naming the field.
func TestService_place_items_theItemAndItsPrice(t *testing.T) {
	sh := ordertest.New(t, phones)
	svc := sh.Service(ordertest.NoTasks{})
	ctx := context.Background()
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 1, Quantity: 2, Item: "RED"})
	if err != nil || o.Item != "RED" || o.PriceCents != 1000 || o.AmountCents != 2000 {
		t.Fatalf("2 of RED: %+v, %v", o, err)
	}
	got, err := svc.Get(ctx, o.No, 1)
	if err != nil || got.Item != "RED" || got.AmountCents != 2000 {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		item  string
		field string
		kind  error
	}{{"", "item", order.ErrInvalid}, {"PINK", "item", order.ErrInvalid}, {"a|b", "item", order.ErrInvalid}} {
		_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 2, Quantity: 1, Item: tc.item})
		if !errors.Is(err, tc.kind) || refusal.Field(err) != tc.field {
			t.Errorf("item %q: %v (field %q), want %v of field %q", tc.item, err, refusal.Field(err), tc.kind, tc.field)
		}
	}
	// The sale's limit across the items: user 1 holds 2 of RED.
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 1, Quantity: 1, Item: "BLUE"}); !errors.Is(err, activity.ErrLimitExceeded) {
		t.Fatalf("a third unit across the items: %v", err)
	}
	// BLUE's own limit: 1.
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 3, Quantity: 2, Item: "BLUE"}); !errors.Is(err, activity.ErrLimitExceeded) ||
		refusal.Field(err) != "item" {
		t.Fatalf("2 of BLUE, its limit 1: %v", err)
	}
}

// An item that sells out is refused by its name, locally after that (the
// item's flag), while the others sell on; the sale's flag is set when every
// item is gone.
func TestService_place_items_soldOutPerItem(t *testing.T) {
	sh := ordertest.New(t, phones)
	svc := sh.Service(ordertest.NoTasks{})
	ctx := context.Background()
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 1, Quantity: 1, Item: "GOLD"}); err != nil {
		t.Fatal(err)
	}
	if !sh.Stock.ItemSoldOut(40, "GOLD") || sh.Stock.SoldOut(40) {
		t.Fatalf("GOLD's last unit sold: item flag %v, sale flag %v", sh.Stock.ItemSoldOut(40, "GOLD"), sh.Stock.SoldOut(40))
	}
	_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: 2, Quantity: 1, Item: "GOLD"})
	if !errors.Is(err, activity.ErrSoldOut) || refusal.Field(err) != "item" || refusal.Message(err, "") != `item "GOLD" is sold out` {
		t.Fatalf("GOLD after its last unit: %v", err)
	}
	if svc.RefusedHere(40, "") {
		t.Fatal("the sale is refused whole while RED and BLUE have units")
	}
	var wg sync.WaitGroup
	for u := int64(10); u < 30; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, sku := range []string{"RED", "BLUE"} {
				_, _ = svc.Place(ctx, order.PlaceRequest{ActivityID: 40, UserID: u, Quantity: 1, Item: sku})
			}
		}()
	}
	wg.Wait()
	left, err := sh.Stock.Remaining(ctx, 40)
	if err != nil || left != 0 {
		t.Fatalf("after 20 users for 8 units: %d left, %v", left, err)
	}
	if !svc.RefusedHere(40, "") {
		t.Fatal("every item sold out, and the sale is not refused locally")
	}
}
