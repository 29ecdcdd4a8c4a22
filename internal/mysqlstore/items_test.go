package mysqlstore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
)

// threeItems is a draft flash sale of three items.
func threeItems() activity.Activity {
	a := sample()
	a.Type, a.GroupSize, a.GroupTTL = activity.Seckill, 0, 0
	a.SKU, a.PriceCents, a.TotalStock = "", 0, 0
	a.Items = []activity.Item{
		{SKU: "PH-RED", Label: "Red", PriceCents: 99900, Stock: 10},
		{SKU: "PH-BLUE", Label: "蓝色", PriceCents: 89900, Stock: 20, PerUserLimit: 1},
		{SKU: "PH-GOLD", Label: "Gold", PriceCents: 129900, Stock: 5},
	}
	return a
}

func TestActivities_items_roundTrip_andAFlatActivityReadsAsOneItem(t *testing.T) {
	s := mysqlstore.NewActivities(migrated(t))
	ctx := context.Background()
	a := threeItems()
	if err := s.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) || got.TotalStock != 35 || got.SKU != "PH-RED" || got.PriceCents != 99900 {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, a)
	}
	flat := sample()
	if err := s.Create(ctx, &flat); err != nil {
		t.Fatal(err)
	}
	page, _, err := s.List(ctx, "", 1, 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("list: %v %v", page, err)
	}
	if want := []activity.Item{{SKU: "PH-1", PriceCents: 99900, Stock: 100}}; !reflect.DeepEqual(page[0].Items, want) {
		t.Fatalf("the flat activity's items %+v, want %+v", page[0].Items, want)
	}
	if !reflect.DeepEqual(page[1].Items, a.Items) {
		t.Fatalf("listed items %+v", page[1].Items)
	}

	two := []activity.Item{{SKU: "A", PriceCents: 1, Stock: 2}, {SKU: "B", PriceCents: 2, Stock: 3, PerUserLimit: 2}}
	upd, err := s.Update(ctx, a.ID, func(x *activity.Activity) error { return x.Apply(activity.Patch{Items: &two}) })
	if err != nil || upd.TotalStock != 5 {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	if got, _ := s.Get(ctx, a.ID); !reflect.DeepEqual(got.Items, two) || got.TotalStock != 5 || got.SKU != "A" {
		t.Fatalf("items after the update: %+v", got)
	}
}

// A change of an item's stock is one version of the activity, with its
// ledger row; a refusal — the activity's state, an unknown item, a stock
// below zero, or during's — changes nothing.
func TestActivities_changeStock_oneVersionAndALedgerRowEach(t *testing.T) {
	s := mysqlstore.NewActivities(migrated(t))
	ctx := context.Background()
	a := threeItems()
	if err := s.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	ok := func(*activity.Activity) error { return nil }
	got, ch, err := s.ChangeStock(ctx, a.ID, "PH-BLUE", 500, ok, nil)
	if err != nil || got.Items[1].Stock != 520 || got.TotalStock != 535 || got.Version != a.Version+1 ||
		ch.Delta != 500 || ch.StockAfter != 520 || ch.Version != got.Version {
		t.Fatalf("+500: %+v %+v %v", got, ch, err)
	}
	var seen activity.Activity
	got, _, err = s.ChangeStock(ctx, a.ID, "PH-GOLD", -5, ok, func(_, next activity.Activity) error { seen = next; return nil })
	if err != nil || got.Items[2].Stock != 0 || seen.Items[2].Stock != 0 || seen.Version != a.Version+2 {
		t.Fatalf("-5: %+v (during saw %+v) %v", got, seen, err)
	}

	short := refusal.New(activity.ErrConflict, "not that many unsold")
	refused := []struct {
		name   string
		sku    string
		delta  int
		check  func(*activity.Activity) error
		during func(before, after activity.Activity) error
		want   error
	}{
		{"unknown item", "PH-PINK", 1, ok, nil, activity.ErrInvalid},
		{"below zero", "PH-RED", -11, ok, nil, activity.ErrInvalid},
		{"refused by check", "PH-RED", 1, func(*activity.Activity) error { return short }, nil, activity.ErrConflict},
		{"refused during", "PH-RED", -1, ok, func(_, _ activity.Activity) error { return short }, activity.ErrConflict},
	}
	for _, tc := range refused {
		if _, _, err := s.ChangeStock(ctx, a.ID, tc.sku, tc.delta, tc.check, tc.during); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	after, _ := s.Get(ctx, a.ID)
	if after.Version != a.Version+2 || after.TotalStock != 530 || after.Items[0].Stock != 10 {
		t.Fatalf("a refused change changed the activity: %+v", after)
	}
	ledger, err := s.Ledger(ctx, a.ID)
	if err != nil || len(ledger) != 2 || ledger[0].SKU != "PH-BLUE" || ledger[0].Delta != 500 ||
		ledger[1].SKU != "PH-GOLD" || ledger[1].Delta != -5 || ledger[1].StockAfter != 0 || ledger[1].Version != a.Version+2 {
		t.Fatalf("ledger %+v, %v", ledger, err)
	}
}

// An order's item and unit price are written with it and read back; a
// later change of the order keeps them; an order of a sale from before
// items names none.
func TestOrders_itemWrittenWithTheOrder_andKept(t *testing.T) {
	s := mysqlstore.NewOrders(migrated(t))
	t.Cleanup(s.Close)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	o := order.Order{No: "7-06H0J68TSYHN2J2MDXSS60AGDR", ActivityID: 7, UserID: 1, Quantity: 2, PriceCents: 800,
		AmountCents: 1600, Status: order.PendingPayment, CreatedAt: at, Item: "PH-BLUE"}
	old := order.Order{No: "7-06H0J68TSYHN2J2MDXSS60AGDS", ActivityID: 7, UserID: 2, Quantity: 1, PriceCents: 999,
		AmountCents: 999, Status: order.PendingPayment, CreatedAt: at}
	if err := s.WriteMany(ctx, []order.Order{o, old}); err != nil {
		t.Fatal(err)
	}
	paid := o
	paid.Status, paid.Fence, paid.PaidAt, paid.Item = order.Paid, 3, at, "" // a change's write carries what Redis holds
	if err := s.Write(ctx, paid); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, o.No)
	if err != nil || got.Item != "PH-BLUE" || got.PriceCents != 800 || got.AmountCents != 1600 || got.Status != order.Paid {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	if got, err := s.Get(ctx, old.No); err != nil || got.Item != "" {
		t.Fatalf("an order of no item: %+v, %v", got, err)
	}
}
