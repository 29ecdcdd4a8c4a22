package activity_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
)

// withItems is a valid flash sale of three items (a phone in three
// colours), in the items form.
func withItems() activity.Activity {
	a := valid(activity.Seckill)
	a.SKU, a.PriceCents, a.TotalStock = "", 0, 0
	a.PerUserLimit = 2
	a.Items = []activity.Item{
		{SKU: "PH-RED", Label: "Red", PriceCents: 99900, Stock: 10},
		{SKU: "PH-BLUE", Label: "Blue", PriceCents: 89900, Stock: 20, PerUserLimit: 1},
		{SKU: "PH-GOLD", Label: "Gold", PriceCents: 129900, Stock: 5},
	}
	return a
}

func TestValidate_items_eachFieldNamedByItsPlace(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*activity.Activity)
	}{
		{"items[1].sku", func(a *activity.Activity) { a.Items[1].SKU = "" }},
		{"items[2].sku", func(a *activity.Activity) { a.Items[2].SKU = "a b" }},
		{"items[2].sku", func(a *activity.Activity) { a.Items[2].SKU = "PH-RED" }}, // twice
		{"items[0].price_cents", func(a *activity.Activity) { a.Items[0].PriceCents = 0 }},
		{"items[2].stock", func(a *activity.Activity) { a.Items[2].Stock = 0 }},
		{"items[1].stock", func(a *activity.Activity) { a.Items[1].Stock = activity.MaxStock + 1 }},
		{"items[1].per_user_limit", func(a *activity.Activity) { a.Items[1].PerUserLimit = -1 }},
		{"items[0].label", func(a *activity.Activity) { a.Items[0].Label = strings.Repeat("x", 101) }},
		{"items[0].label", func(a *activity.Activity) { a.Items[0].Label = "\xff" }},
		{"items", func(a *activity.Activity) {
			a.Items = append(a.Items, make([]activity.Item, activity.MaxItems)...)
		}},
		{"items", func(a *activity.Activity) {
			for i := range a.Items {
				a.Items[i].Stock = activity.MaxStock / 2
			}
		}},
		{"items", func(a *activity.Activity) { a.SKU = "OTHER" }},  // the flat form besides, disagreeing
		{"items", func(a *activity.Activity) { a.TotalStock = 7 }}, // not their sum
		{"shards", func(a *activity.Activity) { a.Shards = 2 }},
	}
	for _, tc := range cases {
		a := withItems()
		tc.edit(&a)
		var fe *activity.FieldError
		err := a.Validate()
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v, want a FieldError on %s", tc.field, err, tc.field)
		}
	}
	a := withItems()
	if err := a.Validate(); err != nil {
		t.Fatalf("three items: %v", err)
	}
	a.Normalize()
	if a.SKU != "PH-RED" || a.PriceCents != 99900 || a.TotalStock != 35 {
		t.Fatalf("normalised: sku %q price %d total %d, want the first item's and the sum", a.SKU, a.PriceCents, a.TotalStock)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("normalised three items: %v", err)
	}
}

// The flat form is one item; so is an activity of one item whose item
// mirrors its flat fields, and its errors keep the flat fields' names.
func TestItemList_flatFormIsOneItem_andKeepsItsFieldNames(t *testing.T) {
	a := valid(activity.Seckill)
	want := []activity.Item{{SKU: "PH-1", PriceCents: 99900, Stock: 100}}
	if got := a.ItemList(); !reflect.DeepEqual(got, want) {
		t.Fatalf("flat form's items %+v, want %+v", got, want)
	}
	if it, ok := a.Item("PH-1"); !ok || it.Stock != 100 {
		t.Fatalf("Item(PH-1) = %+v %v", it, ok)
	}
	if _, ok := a.Item("PH-2"); ok {
		t.Fatal("an unknown sku is an item")
	}
	a.Items = []activity.Item{{SKU: "PH-1", Label: "Black", PriceCents: 99900, Stock: 100}}
	stock := 0
	err := a.Apply(activity.Patch{TotalStock: &stock})
	var fe *activity.FieldError
	if !errors.As(err, &fe) || fe.Field != "total_stock" {
		t.Fatalf("a flat patch of a one-item draft: %v, want a FieldError on total_stock", err)
	}
	stock = 40
	if err := a.Apply(activity.Patch{TotalStock: &stock}); err != nil || a.Items[0].Stock != 40 || a.Items[0].Label != "Black" || a.TotalStock != 40 {
		t.Fatalf("its item follows a flat patch: %v %+v", err, a)
	}
}

func TestApply_items_replacedInADraft_refusedOnceLive(t *testing.T) {
	a := withItems()
	a.Normalize()
	before := a
	price := int64(5)
	var fe *activity.FieldError
	if err := a.Apply(activity.Patch{PriceCents: &price}); !errors.As(err, &fe) || fe.Field != "items" || !reflect.DeepEqual(a, before) {
		t.Fatalf("a flat patch of a draft of three items: %v", err)
	}
	two := []activity.Item{{SKU: "A", PriceCents: 100, Stock: 3}, {SKU: "B", PriceCents: 200, Stock: 4}}
	if err := a.Apply(activity.Patch{Items: &two}); err != nil || len(a.Items) != 2 || a.TotalStock != 7 || a.SKU != "A" {
		t.Fatalf("items replaced: %v %+v", err, a)
	}
	two[0].Stock = 1000 // the caller's slice is not the activity's
	if a.Items[0].Stock != 3 {
		t.Fatal("the activity shares the patch's items")
	}
	a.Status = activity.Published
	before = a
	if err := a.Apply(activity.Patch{Items: &two}); !errors.Is(err, activity.ErrConflict) || !reflect.DeepEqual(a, before) {
		t.Fatalf("items of a published sale: %v", err)
	}
}

func TestValidate_pausedOnlyWhilePublished(t *testing.T) {
	a := valid(activity.Seckill)
	a.Paused = true
	var fe *activity.FieldError
	if err := a.Validate(); !errors.As(err, &fe) || fe.Field != "paused" {
		t.Fatalf("a paused draft: %v", err)
	}
	a.Status = activity.Published
	if err := a.Validate(); err != nil {
		t.Fatalf("a paused sale: %v", err)
	}
	if err := a.SellingAt(t0.Add(time.Minute)); !errors.Is(err, activity.ErrPaused) {
		t.Fatalf("a paused sale sells: %v", err)
	}
}
