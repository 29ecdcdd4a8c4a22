package redisstore

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
)

// A sale of three items as load.lua writes it: R (5 units at 1000), B (10
// at 800, one a user of its own), G (5 at 1500); a user may hold 3 units
// across them.
func itemsMeta(meta fields) fields { return meta.with("items", 3, "total", 20, "limit", 3) }

func itemsHash() fields {
	return fields{"p:R": 1000, "left:R": 5, "total:R": 5, "p:B": 800, "l:B": 1, "left:B": 10, "total:B": 10,
		"p:G": 1500, "left:G": 5, "total:G": 5}
}

// itemsSale seeds a sale of the three items (meta as itemsMeta makes it),
// with edits to its items hash (field, value, …) and its stock the sum of
// their units left.
func itemsSale(meta fields, users fields, edits ...any) [][]any {
	h := itemsHash().with(edits...)
	left := 0
	for _, sku := range []string{"R", "B", "G"} {
		left += toInt(h["left:"+sku])
	}
	return join(sale(itemsMeta(meta), left, users), h.hset(act.Items, saleTTLms))
}

// itemsState is the state itemsSale seeds, with the sale's stock left.
func itemsState(meta fields, left int, users fields, edits ...any) state {
	return merge(saleState(itemsMeta(meta), left, users), state{act.Items: itemsHash().with(edits...).hash(saleTTL)})
}

func toInt(v any) int {
	n, _ := v.(int)
	return n
}

// itemOrder is the record of a new order of an item.
func itemOrder(user, qty, price int, sku string) rec {
	return newOrder(user, qty, price, "").with("item", sku)
}

func TestAcceptScript_items_table(t *testing.T) {
	meta := loaded(flashMeta())
	one := func(user int64, qty any, no, sku string) []luascript.Call {
		return []luascript.Call{itemCall(act, user, qty, no, "", sku)}
	}
	// refused is lib_accept's refusal of an order of sku by a user holding
	// held, the item having ileft units left and the sale left.
	refused := func(code, ileft, held int64, sku string, left int64) []any {
		return []any{code, "", ileft, held, int64(0), int64(0), int64(0), sku, left}
	}
	untouched := itemsState(meta, 20, nil)
	runScriptCases(t, []scriptCase{
		{
			name: "an item: its units and the user's taken, in the sale and the item; the record names it, at its price",
			seed: itemsSale(meta, nil), merged: acceptMerged, calls: one(7, 2, no1, "R"),
			want: []any{[]any{int64(0), no1, int64(3), int64(2), "now+0s", "now+60s", int64(1000), "R", int64(18)}},
			after: merge(itemsState(meta.with("accepted", 1), 18, nil, "left:R", 3), state{
				act.Users:  fields{"7": 2}.hash(saleEndTTL),
				act.Orders: ordersOf(saleEndTTL, no1, itemOrder(7, 2, 1000, "R")),
				act.Outbox: zsetOf(saleEndTTL, no1, at(0)),
			}),
		},
		{
			name: "no item named, in a sale of several (15): nothing changes", seed: itemsSale(meta, nil),
			merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refused(15, 0, 0, "", 20)}, after: untouched,
		},
		{
			name: "an item the sale has not (16): nothing changes", seed: itemsSale(meta, nil),
			merged: acceptMerged, calls: one(7, 1, no1, "P"),
			want: []any{refused(16, 0, 0, "P", 20)}, after: untouched,
		},
		{
			name:   "over the item's own limit (17), with units of the sale's to spare",
			seed:   join(itemsSale(meta, fields{"7": 1}), fields{"7:B": 1}.hset(act.ItemUsers, saleTTLms)),
			merged: acceptMerged, calls: one(7, 1, no1, "B"),
			want:  []any{refused(17, 10, 1, "B", 20)},
			after: merge(itemsState(meta, 20, fields{"7": 1}), state{act.ItemUsers: fields{"7:B": 1}.hash(saleTTL)}),
		},
		{
			name:   "over the sale's limit across the items (4): 2 of R held, 2 of G asked, 3 at most",
			seed:   itemsSale(meta, fields{"7": 2}),
			merged: acceptMerged, calls: one(7, 2, no1, "G"),
			want:  []any{refused(4, 5, 2, "G", 20)},
			after: itemsState(meta, 20, fields{"7": 2}),
		},
		{
			name: "an item sold out (5) while the others have units", seed: itemsSale(meta, nil, "left:G", 0),
			merged: acceptMerged, calls: one(7, 1, no1, "G"),
			want: []any{refused(5, 0, 0, "G", 15)}, after: itemsState(meta, 15, nil, "left:G", 0),
		},
		{
			name: "paused (14): nothing changes", seed: itemsSale(meta.with("paused", 1), nil),
			merged: acceptMerged, calls: one(7, 1, no1, "R"),
			want: []any{refused(14, 5, 0, "R", 20)}, after: itemsState(meta.with("paused", 1), 20, nil),
		},
		{
			name: "one batch: the item's last unit to the first, sold out for the second, another item to a third",
			seed: itemsSale(meta, nil, "left:R", 1), merged: acceptMerged,
			calls: []luascript.Call{itemCall(act, 7, 1, no0, "", "R"), itemCall(act, 8, 1, no1, "", "R"), itemCall(act, 9, 1, no2, "", "B")},
			want: []any{
				[]any{int64(0), no0, int64(0), int64(1), "now+0s", "now+60s", int64(1000), "R", int64(15)},
				refused(5, 0, 0, "R", 15),
				[]any{int64(0), no2, int64(9), int64(1), "now+0s", "now+60s", int64(800), "B", int64(14)},
			},
			after: merge(itemsState(meta.with("accepted", 2), 14, nil, "left:R", 0, "left:B", 9), state{
				act.Users:     fields{"7": 1, "9": 1}.hash(saleEndTTL),
				act.ItemUsers: fields{"9:B": 1}.hash(saleEndTTL),
				act.Orders:    ordersOf(saleEndTTL, no0, itemOrder(7, 1, 1000, "R"), no2, itemOrder(9, 1, 800, "B")),
				act.Outbox:    zsetOf(saleEndTTL, no0, at(0), no2, at(0)),
			}),
		},
		{
			name: "a sale of one item: an item named must be its sku (16); its own name is taken",
			seed: sale(meta.with("sku", "ONE"), 10, nil), merged: acceptMerged,
			calls: []luascript.Call{itemCall(act, 7, 1, no0, "", "TWO"), itemCall(act, 8, 1, no1, "", "ONE"), itemCall(act, 9, 1, no2, "", "")},
			want: []any{
				refused(16, 0, 0, "TWO", 10),
				[]any{int64(0), no1, int64(9), int64(1), "now+0s", "now+60s", int64(1999), "ONE", int64(9)},
				[]any{int64(0), no2, int64(8), int64(1), "now+0s", "now+60s", int64(1999), "ONE", int64(8)},
			},
			after: merge(saleState(meta.with("sku", "ONE", "accepted", 2), 8, nil), state{
				act.Users:  fields{"8": 1, "9": 1}.hash(saleEndTTL),
				act.Orders: ordersOf(saleEndTTL, no1, itemOrder(8, 1, 1999, "ONE"), no2, itemOrder(9, 1, 1999, "ONE")),
				act.Outbox: zsetOf(saleEndTTL, no1, at(0), no2, at(0)),
			}),
		},
	})
}

// A cancelled order of an item gives its units back to the item and the
// sale, and takes them off the user's units of both (of the item: it has
// a limit of its own, so its buyers' units are counted); an item that had
// none left has some again: the restock notice lets the sold-out flags go.
func TestTransitionScript_items_unitsBackToTheItem(t *testing.T) {
	meta := itemsMeta(loaded(flashMeta())).with("accepted", 1)
	keys := []string{act.Meta, act.Stock, act.Users, act.Orders, act.Group("-"), act.GroupMembers("-"), act.Forming(), act.Outbox,
		act.Items, act.ItemUsers}
	o := placed(1500, "").with("qty", 2, "item", "G")
	seed := join(sale(meta, 15, fields{"7": 2, "8": 1}), itemsHash().with("left:G", 0, "l:G", 2).hset(act.Items, saleTTLms),
		fields{"7:G": 2, "8:G": 1}.hset(act.ItemUsers, saleTTLms), orderSeed(o))
	runScriptCases(t, []scriptCase{
		{
			name: "cancel: 2 of G back, the user holds none", seed: seed,
			script: transitionScript, keys: keys, args: []any{"cancel", 5, act.Restock, "7", "", no1},
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(meta.with("returned", 1), 17, fields{"8": 1}), cancelledBy(o, "shopper"), state{
				act.Items:     itemsHash().with("left:G", 2, "l:G", 2).hash(saleTTL),
				act.ItemUsers: fields{"8:G": 1}.hash(saleTTL),
				act.Outbox:    zsetOf(saleEndTTL, no1, at(0)),
			}),
			published: []string{act.Restock + " 1"},
		},
	})
}

// A group of an item: its joiners get the item, at its price, and take its
// units.
func TestGroupScripts_items_theGroupsItem(t *testing.T) {
	meta := itemsMeta(loaded(groupMeta()))
	open := append(enterArgs("open", 7, "")[:5:5], "G")
	opened := func(m fields) state {
		return merge(itemsState(m.with("accepted", 1, "groups_opened", 1), 19, nil, "left:G", 4), state{
			act.Users:  fields{"7": 1}.hash(saleEndTTL),
			act.Orders: ordersOf(saleEndTTL, no1, newOrder(7, 1, 1500, gid).with("item", "G")),
			act.Outbox: zsetOf(saleEndTTL, no1, at(0)),
			act.Group(gid): fields{"status": "forming", "size": 2, "members": 1, "paid": 0, "leader": 7,
				"expires_ms": at(10 * time.Minute), "created_ms": at(0), "item": "G"}.hash(saleEndTTL),
			act.GroupMembers(gid): fields{"7": no1}.hash(saleEndTTL),
			act.Forming():         zsetOf(saleEndTTL, gid, at(10*time.Minute)),
			act.Unsettled():       zsetOf(saleEndTTL, gid, at(10*time.Minute)),
		})
	}
	joinSeed := join(itemsSale(meta.with("accepted", 1, "groups_opened", 1), fields{"8": 1}, "left:G", 4),
		groupSeed(group("forming", 3, 1, 0, at(10*time.Minute)).with("item", "G"), fields{"8": no0}))
	runScriptCases(t, []scriptCase{
		{
			name: "open a group of G", seed: itemsSale(meta, nil), script: openGroupScript, keys: enterKeys(), args: open,
			want: []any{int64(0), int64(4), "now+600s", "now+60s", int64(1500), no1, "G"}, after: opened(meta),
		},
		{
			name: "open without an item, in a sale of several (15)", seed: itemsSale(meta, nil), script: openGroupScript,
			keys: enterKeys(), args: enterArgs("open", 7, ""),
			want: []any{int64(15), int64(0), int64(0), int64(0), int64(0), "", ""}, after: itemsState(meta, 20, nil),
		},
		{
			name: "join: the group's item, G", seed: joinSeed, script: joinGroupScript, keys: enterKeys(), args: enterArgs("join", 7, ""),
			want: []any{int64(0), int64(3), "now+600s", "now+60s", int64(1500), no1, "G"},
			after: merge(itemsState(meta.with("accepted", 2, "groups_opened", 1), 18, fields{"7": 1, "8": 1}, "left:G", 3), state{
				act.Orders:            ordersOf(saleEndTTL, no1, newOrder(7, 1, 1500, gid).with("item", "G")),
				act.Outbox:            zsetOf(saleEndTTL, no1, at(0)),
				act.Group(gid):        group("forming", 3, 2, 0, at(10*time.Minute)).with("item", "G").hash(saleTTL),
				act.GroupMembers(gid): fields{"8": no0, "7": no1}.hash(saleTTL),
			}),
		},
	})
}
