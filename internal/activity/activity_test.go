package activity_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func valid(typ activity.Type) activity.Activity {
	a := activity.Activity{
		Type: typ, Name: "Phone", SKU: "PH-1", PriceCents: 99900, TotalStock: 100, PerUserLimit: 1,
		StartsAt: t0, EndsAt: t0.Add(time.Hour), PaymentTTL: 15 * time.Minute, Status: activity.Draft,
	}
	if typ == activity.GroupBuy {
		a.GroupSize, a.GroupTTL = 5, time.Hour
	}
	return a
}

func TestValidate(t *testing.T) {
	cases := []struct {
		field string
		edit  func(*activity.Activity)
	}{
		{"type", func(a *activity.Activity) { a.Type = "auction" }},
		{"type", func(a *activity.Activity) { a.Type = "" }},
		{"name", func(a *activity.Activity) { a.Name = "  " }},
		{"name", func(a *activity.Activity) { a.Name = strings.Repeat("x", 201) }},
		{"sku", func(a *activity.Activity) { a.SKU = "" }},
		{"sku", func(a *activity.Activity) { a.SKU = "a b" }},
		{"price_cents", func(a *activity.Activity) { a.PriceCents = 0 }},
		{"total_stock", func(a *activity.Activity) { a.TotalStock = 0 }},
		{"total_stock", func(a *activity.Activity) { a.TotalStock = -5 }},
		{"total_stock", func(a *activity.Activity) { a.TotalStock = activity.MaxStock + 1 }},
		{"per_user_limit", func(a *activity.Activity) { a.PerUserLimit = 0 }},
		{"ends_at", func(a *activity.Activity) { a.EndsAt = a.StartsAt }},
		{"ends_at", func(a *activity.Activity) { a.EndsAt = a.StartsAt.Add(-time.Second) }},
		{"starts_at", func(a *activity.Activity) { a.StartsAt = time.Time{} }},
		{"payment_ttl_seconds", func(a *activity.Activity) { a.PaymentTTL = time.Second }},
		{"group_size", func(a *activity.Activity) { a.GroupSize = 3 }}, // on a seckill
		{"shards", func(a *activity.Activity) { a.Shards = -1 }},
		{"shards", func(a *activity.Activity) { a.Shards = activity.MaxShards + 1 }},
		{"shards", func(a *activity.Activity) { a.TotalStock, a.Shards = 3, 4 }}, // a shard without a unit
	}
	for _, tc := range cases {
		a := valid(activity.Seckill)
		tc.edit(&a)
		var fe *activity.FieldError
		err := a.Validate()
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, activity.ErrInvalid) {
			t.Errorf("%s: got %v, want a FieldError on %s", tc.field, err, tc.field)
		}
	}
	g := valid(activity.GroupBuy)
	g.GroupSize = 0
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), "group_size") {
		t.Errorf("group buy without group_size: %v", err)
	}
	g = valid(activity.GroupBuy)
	g.GroupTTL = 0
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), "group_ttl_seconds") {
		t.Errorf("group buy without group_ttl_seconds: %v", err)
	}
	g = valid(activity.GroupBuy)
	g.Shards = 2
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), "shards") {
		t.Errorf("group buy in 2 shards: %v", err)
	}
	for _, typ := range []activity.Type{activity.Seckill, activity.GroupBuy} {
		a := valid(typ)
		if err := a.Validate(); err != nil {
			t.Errorf("valid %s: %v", typ, err)
		}
	}
	a := valid(activity.Seckill)
	a.Shards = activity.MaxShards
	if err := a.Validate(); err != nil {
		t.Errorf("valid seckill in %d shards: %v", activity.MaxShards, err)
	}
}

// A user's shard is the same for every call, spread over the shards, and
// 0 for a sale of one shard.
func TestShardOf_stableAndSpread(t *testing.T) {
	counts := make([]int, 6)
	for u := int64(1); u <= 6000; u++ {
		s := activity.ShardOf(u, 6)
		if s != activity.ShardOf(u, 6) || s < 0 || s >= 6 {
			t.Fatalf("user %d: shard %d", u, s)
		}
		counts[s]++
		if activity.ShardOf(u, 1) != 0 || activity.ShardOf(u, 0) != 0 {
			t.Fatalf("user %d not in shard 0 of a sale of one", u)
		}
	}
	for s, n := range counts {
		if n < 850 || n > 1150 {
			t.Fatalf("shard %d has %d of 6,000 users: %v", s, n, counts)
		}
	}
	// Fixed for ever: a user's orders of a live sale are found in their
	// shard, by every process of every release.
	got := []int{activity.ShardOf(1, 3), activity.ShardOf(2, 3), activity.ShardOf(1000, 64), activity.ShardOf(123456789, 6)}
	if want := []int{2, 1, 8, 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("shards %v, were %v: a change strands every sharded sale's orders", got, want)
	}
}

func TestApply_draftChangesAnything_publishedOnlyNameAndLaterEnd(t *testing.T) {
	stock, later, earlier := 50, t0.Add(2*time.Hour), t0.Add(30*time.Minute)
	name := "New name"

	a := valid(activity.Seckill)
	if err := a.Apply(activity.Patch{TotalStock: &stock, Name: &name}); err != nil || a.TotalStock != 50 || a.Name != name {
		t.Fatalf("draft patch: %v %+v", err, a)
	}

	a = valid(activity.Seckill)
	a.Status = activity.Published
	before := a
	if err := a.Apply(activity.Patch{TotalStock: &stock}); !errors.Is(err, activity.ErrConflict) || !reflect.DeepEqual(a, before) {
		t.Fatalf("stock change after publish: %v, changed %v", err, !reflect.DeepEqual(a, before))
	}
	if err := a.Apply(activity.Patch{EndsAt: &earlier}); !errors.Is(err, activity.ErrConflict) || !reflect.DeepEqual(a, before) {
		t.Fatalf("earlier end after publish: %v", err)
	}
	if err := a.Apply(activity.Patch{EndsAt: &later, Name: &name}); err != nil || !a.EndsAt.Equal(later) || a.Name != name {
		t.Fatalf("later end and new name after publish: %v %+v", err, a)
	}

	shards := 4
	if err := a.Apply(activity.Patch{Shards: &shards}); !errors.Is(err, activity.ErrConflict) || a.Shards != 0 {
		t.Fatalf("shards change after publish: %v, %+v", err, a)
	}

	a.Status = activity.Closed
	if err := a.Apply(activity.Patch{Name: &name}); !errors.Is(err, activity.ErrConflict) {
		t.Fatalf("patch of a closed activity: %v", err)
	}

	bad := 0
	a = valid(activity.Seckill)
	before = a
	if err := a.Apply(activity.Patch{TotalStock: &bad}); !errors.Is(err, activity.ErrInvalid) || !reflect.DeepEqual(a, before) {
		t.Fatalf("invalid draft patch: %v, changed %v", err, !reflect.DeepEqual(a, before))
	}
}
