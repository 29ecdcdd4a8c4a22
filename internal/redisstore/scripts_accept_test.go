package redisstore

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// acceptCall is one accept of qty units by user as order no, with
// Idempotency-Key key ("" for none), in activity a.
func acceptCall(a rediskeys.Activity, user int64, qty any, no, key string) luascript.Call {
	return itemCall(a, user, qty, no, key, "")
}

// itemCall is acceptCall of item sku ("" for the sale's one item).
func itemCall(a rediskeys.Activity, user int64, qty any, no, key, sku string) luascript.Call {
	field := ""
	if key != "" {
		field = rediskeys.IdempotencyField(user, key)
	}
	return luascript.Call{Keys: []string{a.Meta, a.Stock, a.Users, a.Orders, a.Idem, a.Outbox, a.Items, a.ItemUsers},
		Args: []any{user, qty, no, field, sku}}
}

// accepted is accept.lua's answer for an order taken now at 1999 in a sale
// of one item loaded before items (no sku in its meta): units left and
// units the user holds after it.
func accepted(no string, left, held int64) []any {
	return []any{int64(0), no, left, held, "now+0s", "now+60s", int64(1999), "", left}
}

func refusedAccept(code, left, held int64) []any {
	return []any{code, "", left, held, int64(0), int64(0), int64(0), "", left}
}

func TestAcceptScript_table(t *testing.T) {
	one := func(user int64, qty any, no, key string) []luascript.Call {
		return []luascript.Call{acceptCall(act, user, qty, no, key)}
	}
	// A loaded sale, user 8 holding one unit already, 9 left.
	meta := loaded(flashMeta()).with("accepted", 1)
	open := sale(meta, 9, fields{"8": 1})
	untouched := saleState(meta, 9, fields{"8": 1})
	took := func(users fields, left int, n int, noRec ...any) state {
		return merge(saleState(meta.with("accepted", 1+n), left, users), state{
			act.Orders: ordersOf(saleEndTTL, noRec...),
		})
	}
	withOutbox := func(s state, memberAt ...any) state {
		return merge(s, state{act.Outbox: zsetOf(saleEndTTL, memberAt...)})
	}
	// One order of two units by user 7 taken.
	one7 := withOutbox(took(fields{"7": 2, "8": 1}, 7, 1, no1, newOrder(7, 2, 1999, "")), no1, at(0))
	// Another user's record already standing at no1.
	other := placed(1999, "").with("user", 9)

	runScriptCases(t, []scriptCase{
		{
			name: "accepted: units taken, the record written, on the outbox, no key remembered", seed: open,
			merged: acceptMerged, calls: one(7, 2, no1, ""),
			want: []any{accepted(no1, 7, 2)}, after: one7,
		},
		{
			name: "accepted with an Idempotency-Key remembers it, as long as the sale", seed: open,
			merged: acceptMerged, calls: one(7, 2, no1, "key-1"),
			want:  []any{accepted(no1, 7, 2)},
			after: merge(one7, state{act.Idem: fields{"7:key-1": no1}.hash(saleEndTTL)}),
		},
		{
			name:   "a key that named an order replays it (7) and changes nothing",
			seed:   join(open, fields{"7:key-1": no0}.hset(act.Idem, saleTTLms)),
			merged: acceptMerged, calls: one(7, 1, no1, "key-1"),
			want:  []any{[]any{int64(7), no0, int64(0), int64(0), int64(0), int64(0), int64(0), "", int64(0)}},
			after: merge(untouched, state{act.Idem: fields{"7:key-1": no0}.hash(saleTTL)}),
		},
		{
			name: "an order number taken by another user (13): nothing changes, the key is not remembered",
			seed: join(open, orderSeed(other)), merged: acceptMerged, calls: one(7, 1, no1, "key-1"),
			want: []any{refusedAccept(13, 0, 0)}, after: merge(untouched, orderState(other)),
		},
		{
			// go-redis sends a script again after a read timeout although it
			// ran: the second run answers as the first, not with a second order.
			name: "the request's own order, made by a run whose answer was lost: its answer again, nothing changes",
			seed: join(open, orderSeed(placed(1999, ""))), merged: acceptMerged, calls: one(7, 1, no1, ""),
			want:  []any{[]any{int64(0), no1, int64(9), int64(0), "now-10s", "now+50s", int64(1999), "", int64(9)}},
			after: merge(untouched, orderState(placed(1999, ""))),
		},
		{
			name:   "keys that have a ttl keep it (users, orders), one without gets expire_at_ms (outbox)",
			seed:   join(open, orders(no0, placed(1999, "").with("user", 8)), [][]any{{"ZADD", act.Outbox, at(-time.Minute), no0}}),
			merged: acceptMerged, calls: one(7, 2, no1, ""),
			want: []any{accepted(no1, 7, 2)},
			after: merge(saleState(meta.with("accepted", 2), 7, fields{"7": 2, "8": 1}), state{
				act.Orders: ordersOf(saleTTL, no0, placed(1999, "").with("user", 8), no1, newOrder(7, 2, 1999, "")),
				act.Outbox: zsetOf(saleEndTTL, no0, at(-time.Minute), no1, at(0)),
			}),
		},
		{
			name: "a sale loaded before expire_at_ms: the keys created have no expiry (Upgrade gives it one)",
			seed: sale(flashMeta(), 10, nil), merged: acceptMerged, calls: one(7, 2, no1, ""),
			want: []any{accepted(no1, 8, 2)},
			after: merge(saleState(flashMeta().with("accepted", 1), 8, nil), state{
				act.Users:  fields{"7": 2}.hash(persist),
				act.Orders: ordersOf(persist, no1, newOrder(7, 2, 1999, "")),
				act.Outbox: zsetOf(persist, no1, at(0)),
			}),
		},
		{
			name: "a negative quantity (6) takes nothing and gives nothing", seed: open,
			merged: acceptMerged, calls: one(7, -3, no1, "key-1"),
			want: []any{refusedAccept(6, 9, 0)}, after: untouched,
		},
		{
			name: "a zero quantity (6)", seed: open, merged: acceptMerged, calls: one(7, 0, no1, ""),
			want: []any{refusedAccept(6, 9, 0)}, after: untouched,
		},
		{
			name: "a quantity that is not a number (6)", seed: open, merged: acceptMerged, calls: one(7, "many", no1, ""),
			want: []any{refusedAccept(6, 9, 0)}, after: untouched,
		},
		{
			name: "over the per-user limit (4)", seed: sale(meta, 8, fields{"7": 1, "8": 1}),
			merged: acceptMerged, calls: one(7, 2, no1, "key-1"),
			want: []any{refusedAccept(4, 8, 1)}, after: saleState(meta, 8, fields{"7": 1, "8": 1}),
		},
		{
			name: "sold out (5)", seed: sale(meta, 0, fields{"8": 1}), merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refusedAccept(5, 0, 0)}, after: saleState(meta, 0, fields{"8": 1}),
		},
		{
			name: "more asked than left (5) takes nothing", seed: sale(meta, 1, fields{"8": 1}),
			merged: acceptMerged, calls: one(7, 2, no1, "key-1"),
			want: []any{refusedAccept(5, 1, 0)}, after: saleState(meta, 1, fields{"8": 1}),
		},
		{
			name: "not started (2)", seed: sale(meta.with("starts_ms", at(time.Hour), "ends_ms", at(2*time.Hour)), 9, fields{"8": 1}),
			merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refusedAccept(2, 9, 0)}, after: saleState(meta.with("starts_ms", at(time.Hour), "ends_ms", at(2*time.Hour)), 9, fields{"8": 1}),
		},
		{
			name: "ended (3)", seed: sale(meta.with("starts_ms", at(-2*time.Hour), "ends_ms", at(-time.Second)), 9, fields{"8": 1}),
			merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refusedAccept(3, 9, 0)}, after: saleState(meta.with("starts_ms", at(-2*time.Hour), "ends_ms", at(-time.Second)), 9, fields{"8": 1}),
		},
		{
			name: "closed (3) inside its window", seed: sale(meta.with("status", "closed"), 9, fields{"8": 1}),
			merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refusedAccept(3, 9, 0)}, after: saleState(meta.with("status", "closed"), 9, fields{"8": 1}),
		},
		{
			name: "draft (1)", seed: sale(meta.with("status", "draft"), 9, fields{"8": 1}),
			merged: acceptMerged, calls: one(7, 1, no1, ""),
			want: []any{refusedAccept(1, 9, 0)}, after: saleState(meta.with("status", "draft"), 9, fields{"8": 1}),
		},
		{
			name: "unknown activity (1) creates no key at all, not even the Idempotency-Key", seed: nil,
			merged: acceptMerged, calls: one(7, 1, no1, "key-1"),
			want: []any{refusedAccept(1, 0, 0)}, after: state{},
		},
		{
			name: "a group buy's orders are not accepted here (8)", seed: sale(loaded(groupMeta()), 10, nil),
			merged: acceptMerged, calls: one(7, 1, no1, "key-1"),
			want: []any{refusedAccept(8, 10, 0)}, after: saleState(loaded(groupMeta()), 10, nil),
		},
	})
}

// A batch is decided call by call, in order, each on what the calls before
// it left; what they write is written once.
func TestAcceptScript_batch_table(t *testing.T) {
	meta := loaded(flashMeta()).with("accepted", 1)
	call := func(user int64, qty any, no, key string) luascript.Call { return acceptCall(act, user, qty, no, key) }
	act2 := rediskeys.For(2)
	meta2 := loaded(flashMeta()).with("total", 5, "price", 500)

	runScriptCases(t, []scriptCase{
		{
			// The last unit's order carries the sale's version (3): activity.sold_out's.
			name: "three left, four buyers: each takes from what the ones before left; the last unit's order marks the sell-out",
			seed: sale(meta, 3, fields{"8": 1}), merged: acceptMerged,
			calls: []luascript.Call{call(7, 2, no0, ""), call(9, 2, no1, ""), call(10, 1, no2, "k"), call(11, 1, no3, "")},
			want:  []any{accepted(no0, 1, 2), refusedAccept(5, 1, 0), accepted(no2, 0, 1), refusedAccept(5, 0, 0)},
			after: merge(saleState(meta.with("accepted", 3), 0, fields{"7": 2, "8": 1, "10": 1}), state{
				act.Orders: ordersOf(saleEndTTL, no0, newOrder(7, 2, 1999, ""), no2, newOrder(10, 1, 1999, "").with("soldout", 3)),
				act.Outbox: zsetOf(saleEndTTL, no0, at(0), no2, at(0)),
				act.Idem:   fields{"10:k": no2}.hash(saleEndTTL),
			}),
		},
		{
			// Without the per-user lock one user's requests may share a batch.
			name: "one user three times, limit 2: the third is over the limit",
			seed: sale(meta, 9, nil), merged: acceptMerged,
			calls: []luascript.Call{call(7, 1, no0, ""), call(7, 1, no1, ""), call(7, 1, no2, "")},
			want:  []any{accepted(no0, 8, 1), accepted(no1, 7, 2), refusedAccept(4, 7, 2)},
			after: merge(saleState(meta.with("accepted", 3), 7, nil), state{
				act.Users:  fields{"7": 2}.hash(saleEndTTL),
				act.Orders: ordersOf(saleEndTTL, no0, newOrder(7, 1, 1999, ""), no1, newOrder(7, 1, 1999, "")),
				act.Outbox: zsetOf(saleEndTTL, no0, at(0), no1, at(0)),
			}),
		},
		{
			name: "one Idempotency-Key twice in a batch: one order, the second replays it",
			seed: sale(meta, 9, nil), merged: acceptMerged,
			calls: []luascript.Call{call(7, 1, no0, "k"), call(7, 1, no1, "k")},
			want:  []any{accepted(no0, 8, 1), []any{int64(7), no0, int64(0), int64(0), int64(0), int64(0), int64(0), "", int64(0)}},
			after: merge(saleState(meta.with("accepted", 2), 8, nil), state{
				act.Users:  fields{"7": 1}.hash(saleEndTTL),
				act.Orders: ordersOf(saleEndTTL, no0, newOrder(7, 1, 1999, "")),
				act.Outbox: zsetOf(saleEndTTL, no0, at(0)),
				act.Idem:   fields{"7:k": no0}.hash(saleEndTTL),
			}),
		},
		{
			name: "one order number twice in a batch: the second is refused (13)",
			seed: sale(meta, 9, nil), merged: acceptMerged,
			calls: []luascript.Call{call(7, 1, no0, ""), call(9, 1, no0, "")},
			want:  []any{accepted(no0, 8, 1), refusedAccept(13, 0, 0)},
			after: merge(saleState(meta.with("accepted", 2), 8, nil), state{
				act.Users:  fields{"7": 1}.hash(saleEndTTL),
				act.Orders: ordersOf(saleEndTTL, no0, newOrder(7, 1, 1999, "")),
				act.Outbox: zsetOf(saleEndTTL, no0, at(0)),
			}),
		},
		{
			name:   "two sales in one batch: each on its own keys",
			seed:   join(sale(meta, 9, nil), fields(meta2).hset(act2.Meta, saleTTLms), [][]any{{"SET", act2.Stock, 5, "PX", saleTTLms}}),
			merged: acceptMerged,
			calls:  []luascript.Call{acceptCall(act2, 7, 1, "2-AAAA", ""), call(7, 2, no1, ""), acceptCall(act2, 8, 2, "2-BBBB", "")},
			want: []any{
				[]any{int64(0), "2-AAAA", int64(4), int64(1), "now+0s", "now+60s", int64(500), "", int64(4)},
				accepted(no1, 7, 2),
				[]any{int64(0), "2-BBBB", int64(2), int64(2), "now+0s", "now+60s", int64(500), "", int64(2)},
			},
			after: merge(saleState(meta.with("accepted", 2), 7, nil), state{
				act.Users:   fields{"7": 2}.hash(saleEndTTL),
				act.Orders:  ordersOf(saleEndTTL, no1, newOrder(7, 2, 1999, "")),
				act.Outbox:  zsetOf(saleEndTTL, no1, at(0)),
				act2.Meta:   meta2.with("accepted", 2).hash(saleTTL),
				act2.Stock:  "2 " + saleTTL,
				act2.Users:  fields{"7": 1, "8": 2}.hash(saleEndTTL),
				act2.Orders: ordersOf(saleEndTTL, "2-AAAA", newOrder(7, 1, 500, ""), "2-BBBB", newOrder(8, 2, 500, "")),
				act2.Outbox: zsetOf(saleEndTTL, "2-AAAA", at(0), "2-BBBB", at(0)),
			}),
		},
		{
			// A sale still in the form before 2026-11-24 (its outbox a
			// stream) that api upgrade-redis has not moved: the accept fails
			// before it writes anything — no units taken for an order that
			// would never reach the outbox, nor MySQL.
			name: "an outbox of another type fails the batch before any write",
			seed: join(sale(meta, 9, nil), [][]any{{"XADD", act.Outbox, "1-1", "o", no2}}), merged: acceptMerged,
			calls: []luascript.Call{call(7, 1, no0, "k"), call(9, 1, no1, "")},
			want:  []any{"error: WRONGTYPE", "error: WRONGTYPE"},
			after: merge(saleState(meta, 9, nil), state{act.Outbox: "stream[1] " + persist}),
		},
		{
			name: "a batch refused whole writes nothing",
			seed: sale(meta, 0, nil), merged: acceptMerged,
			calls: []luascript.Call{call(7, 1, no0, "k"), call(9, 1, no1, "")},
			want:  []any{refusedAccept(5, 0, 0), refusedAccept(5, 0, 0)},
			after: saleState(meta, 0, nil),
		},
	})
}
