package stock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/testenv"
)

// itemKeys are load.lua's KEYS with a sale's items hash and itemusers.
var itemKeys = []string{sale1.Meta, sale1.Stock, sale1.Users, sale1.Outbox, sale1.Forming(), sale1.Unsettled(),
	sale1.Orders, sale1.Idem, sale1.Payments, sale1.Transit, sale1.Taken, sale1.Applied, sale1.Items, sale1.ItemUsers}

// withItems is r of items (sku, price, own limit, stock, …), its total
// their sum, loaded as shard 0 of 1.
func (r rules) withItems(items ...any) rules {
	r.total = 0
	for i := 3; i < len(items); i += 4 {
		r.total += items[i].(int)
	}
	r.more = append([]any{1, r.total, 0, "0", len(items) / 4}, items...)
	return r
}

// Loads carry restocks (docs/orders.md, "Restock"): a newer version's
// totals, the sale's and each item's, are brought about by adding the
// difference to what is left; a sold-out sale or item given units again
// publishes the restock notice; what is sold is never taken back.
func TestLoadScript_restocksCarried_table(t *testing.T) {
	v1 := flash(1)
	one := func(version int64, total int) rules {
		r := v1
		r.version, r.total = version, total
		return r.withItems("ONE", 1999, 0, total)
	}
	// A sale of one item as v1 loaded it, 10 units, with left of them left.
	live := func(left int) [][]any {
		m := one(1, 10).meta("accepted", 3, "returned", 0, "sku", "ONE")
		return [][]any{hsetCmd(sale1.Meta, m), {"SET", sale1.Stock, left}}
	}
	meta := func(r rules, total, saleTotal int) map[string]any {
		m := r.meta("accepted", 3, "returned", 0, "sku", "ONE")
		m["total"], m["sale_total"] = total, saleTotal
		return m
	}
	state := func(m map[string]any, left string) map[string]string {
		return map[string]string{sale1.Meta: hashState(m, "ttl~7200s"), sale1.Stock: left + " ttl~7200s"}
	}
	// Three items: R 5 units, B 10 (its own limit 1), G 5.
	three := func(version int64, r, b, g int) rules {
		x := v1
		x.version = version
		return x.withItems("R", 1000, 0, r, "B", 800, 1, b, "G", 1500, 0, g)
	}
	items := func(rl, rt, bl, bt, gl, gt int) string {
		return hashState(map[string]any{"p:R": 1000, "left:R": rl, "total:R": rt, "p:B": 800, "l:B": 1, "left:B": bl, "total:B": bt,
			"p:G": 1500, "left:G": gl, "total:G": gt}, "ttl~7200s")
	}
	threeMeta := func(r rules, total int) map[string]any {
		m := r.meta("accepted", 0, "returned", 0)
		m["items"], m["total"], m["sale_total"] = 3, total, total
		return m
	}
	liveThree := func(rl, bl, gl int) [][]any {
		return [][]any{hsetCmd(sale1.Meta, threeMeta(three(1, 5, 10, 5), 20)), {"SET", sale1.Stock, rl + bl + gl},
			hsetCmd(sale1.Items, map[string]any{"p:R": 1000, "left:R": rl, "total:R": 5, "p:B": 800, "l:B": 1, "left:B": bl,
				"total:B": 10, "p:G": 1500, "left:G": gl, "total:G": 5})}
	}
	restock := sale1.Restock + " 1"
	runLoadCases(t, []loadCase{
		{
			name: "a sale of one item keeps its stock in stock, its sku in the meta, the lesser limit the sale's",
			load: func() rules { r := v1; return r.withItems("ONE", 1999, 1, 10) }(), keys: itemKeys, want: []any{int64(10), int64(1)},
			after: state(func() map[string]any {
				m := v1.meta("accepted", 0, "returned", 0, "sku", "ONE")
				m["limit"] = 1
				return m
			}(), "10"),
		},
		{
			name: "+5 to a sale with units left: 5 more left, total and sale_total 15; no notice",
			seed: live(8), load: one(2, 15), keys: itemKeys, want: []any{int64(13), int64(1)},
			after: state(meta(one(2, 15), 15, 15), "13"),
		},
		{
			name: "+5 to a sold-out sale: the restock notice lets every sold-out flag go",
			seed: live(0), load: one(2, 15), keys: itemKeys, want: []any{int64(5), int64(1)},
			after: state(meta(one(2, 15), 15, 15), "5"), published: []string{restock},
		},
		{
			name: "the next change's load finds the restock in and adds nothing more",
			seed: [][]any{hsetCmd(sale1.Meta, meta(one(2, 15), 15, 15)), {"SET", sale1.Stock, 13}},
			load: one(3, 15), keys: itemKeys, want: []any{int64(13), int64(1)},
			after: state(meta(one(3, 15), 15, 15), "13"),
		},
		{
			name: "an older version's total changes nothing",
			seed: live(8), load: one(1, 15), keys: itemKeys, want: []any{int64(8), int64(0)},
			after: map[string]string{sale1.Meta: hashState(one(1, 10).meta("accepted", 3, "returned", 0, "sku", "ONE"), "persist"),
				sale1.Stock: "8 persist"},
		},
		{
			name: "a total below what is sold (Redis sold what MySQL removed: not by design) takes what is left, keeps the rest in its total",
			seed: live(3), load: one(2, 4), keys: itemKeys, want: []any{int64(0), int64(1)},
			after: state(meta(one(2, 4), 7, 7), "0"),
		},
		{
			name: "first load of three items: each its price, own limit, units left and total; the stock their sum",
			load: three(1, 5, 10, 5), keys: itemKeys, want: []any{int64(20), int64(1)},
			after: map[string]string{sale1.Meta: hashState(threeMeta(three(1, 5, 10, 5), 20), "ttl~7200s"),
				sale1.Stock: "20 ttl~7200s", sale1.Items: items(5, 5, 10, 10, 5, 5)},
		},
		{
			name: "+500 of B, G sold out given 2: each item's difference added, the stock by their sum, the notice",
			seed: liveThree(2, 10, 0), load: three(2, 5, 510, 7), keys: itemKeys, want: []any{int64(514), int64(1)},
			after: map[string]string{sale1.Meta: hashState(threeMeta(three(2, 5, 510, 7), 522), "ttl~7200s"),
				sale1.Stock: "514 ttl~7200s", sale1.Items: items(2, 5, 510, 510, 2, 7)},
			published: []string{restock},
		},
	})
}

// Take removes unsold units of an item, never more than are left, and
// only at the version MySQL holds; the load of the version that records
// the removal then changes nothing more.
func TestKeeper_take_unsoldUnitsOnly_atMySQLsVersion(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	k := New(rdb, Config{})
	a := activity.Activity{ID: 1, Type: activity.Seckill, Name: "n", PerUserLimit: 2, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTTL: time.Minute, Status: activity.Published, Version: 3,
		Items: []activity.Item{{SKU: "R", PriceCents: 1000, Stock: 5}, {SKU: "B", PriceCents: 800, Stock: 10}}}
	a.Normalize()
	if _, err := k.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Take(ctx, a, "B", 11); !errors.Is(err, ErrShort) || !errors.Is(err, activity.ErrConflict) {
		t.Fatalf("11 of 10: %v", err)
	}
	older := a
	older.Version = 2
	if _, err := k.Take(ctx, older, "B", 1); err == nil {
		t.Fatal("taken at a version Redis does not hold")
	}
	newer := a
	newer.Version, newer.Items = 4, slices.Clone(a.Items)
	newer.Items[0].Stock = 6 // an admin change Redis missed: loaded first, then taken
	newer.Normalize()
	if left, err := k.Take(ctx, newer, "B", 4); err != nil || left != 6 {
		t.Fatalf("4 of B at version 4 (Redis at 3): %d, %v", left, err)
	}
	if _, err := k.Take(ctx, newer, "P", 1); !errors.Is(err, activity.ErrInvalid) {
		t.Fatalf("an unknown item: %v", err)
	}
	after := newer
	after.Version, after.Items = 5, slices.Clone(newer.Items)
	after.Items[1].Stock = 6
	after.Normalize()
	if _, err := k.Load(ctx, after); err != nil {
		t.Fatal(err)
	}
	v, err := k.Read(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []activity.ItemLive{{SKU: "B", Total: 6, Remaining: 6}, {SKU: "R", Total: 6, Remaining: 6}}
	if v.Total != 12 || v.Remaining != 12 || !slices.Equal(v.Items, want) {
		t.Fatalf("after the removal's load: total %d, remaining %d, items %+v", v.Total, v.Remaining, v.Items)
	}
}
