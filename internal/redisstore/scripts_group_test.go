package redisstore

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// enterKeys are open_group's or join_group's keys for gid.
func enterKeys() []string { return groupKeys(act, gid) }

// enterArgs are their arguments for user's order no1 of one unit in gid,
// with Idempotency-Key key ("" for none) used to op ("open", "join").
func enterArgs(op string, user int64, key string) []any {
	field := ""
	if key != "" {
		field = idemField(op, user, key)
	}
	return []any{user, 1, no1, gid, field, ""}
}

// idemField is the idem hash's field of user's key used to open ("open")
// or to join ("join") gid.
func idemField(op string, user int64, key string) string {
	if op == "open" {
		return rediskeys.OpenIdempotencyField(user, key)
	}
	return rediskeys.JoinIdempotencyField(gid, user, key)
}

// The Idempotency-Key "key-1" of user 7, used to open and used to join:
// two fields of the idem hash.
var (
	openKey = idemField("open", 7, "key-1")
	joinKey = idemField("join", 7, "key-1")
)

func TestOpenGroupScript_table(t *testing.T) {
	keys := enterKeys()
	args := func(key string) []any { return enterArgs("open", 7, key) }
	ok := []any{int64(0), int64(9), "now+600s", "now+60s", int64(999), no1, ""}
	refused := func(code, left int64) []any { return []any{code, left, int64(0), int64(0), int64(0), "", ""} }
	// opened is the state after user 7 opened gid in a sale of meta with 10
	// units: the keys it created expire with the sale (ttl).
	opened := func(meta fields, ttl string) state {
		return merge(saleState(meta.with("accepted", 1, "groups_opened", 1), 9, nil), state{
			act.Users:  fields{"7": 1}.hash(ttl),
			act.Orders: ordersOf(ttl, no1, newOrder(7, 1, 999, gid)),
			act.Outbox: zsetOf(ttl, no1, at(0)),
			act.Group(gid): fields{"status": "forming", "size": 2, "members": 1, "paid": 0, "leader": 7,
				"expires_ms": at(10 * time.Minute), "created_ms": at(0)}.hash(ttl),
			act.GroupMembers(gid): fields{"7": no1}.hash(ttl),
			act.Forming():         zsetOf(ttl, gid, at(10*time.Minute)),
			act.Unsettled():       zsetOf(ttl, gid, at(10*time.Minute)),
		})
	}
	untouched := saleState(groupMeta(), 10, nil)
	// Another order and group standing at no1 and gid.
	otherOrder := placed(999, gid2)
	otherGroup := group("forming", 2, 1, 0, at(5*time.Minute))

	runScriptCases(t, []scriptCase{
		{
			name: "open: the order, the group with its first member, listed as forming and unsettled; every key expires with the sale",
			seed: sale(loaded(groupMeta()), 10, nil), script: openGroupScript, keys: keys, args: args(""),
			want: ok, after: opened(loaded(groupMeta()), saleEndTTL),
		},
		{
			name:   "open with an Idempotency-Key remembers it under open: (the same key used to join is another)",
			seed:   join(sale(loaded(groupMeta()), 10, nil), fields{joinKey: no2}.hset(act.Idem, saleTTLms)),
			script: openGroupScript, keys: keys, args: args("key-1"),
			want:  ok,
			after: merge(opened(loaded(groupMeta()), saleEndTTL), state{act.Idem: fields{openKey: no1, joinKey: no2}.hash(saleTTL)}),
		},
		{
			name:   "a key that opened a group replays its order (7) and changes nothing",
			seed:   join(sale(groupMeta(), 10, nil), fields{openKey: no0}.hset(act.Idem, saleTTLms)),
			script: openGroupScript, keys: keys, args: args("key-1"),
			want:  []any{int64(7), int64(0), int64(0), int64(0), int64(0), no0, ""},
			after: merge(untouched, state{act.Idem: fields{openKey: no0}.hash(saleTTL)}),
		},
		{
			name: "a sale loaded before expire_at_ms: the keys created have no expiry (Upgrade gives it one)",
			seed: sale(groupMeta(), 10, nil), script: openGroupScript, keys: keys, args: args(""),
			want: ok, after: opened(groupMeta(), persist),
		},
		{
			name: "a loaded sale: a forming zset with a ttl keeps it, an unsettled zset without one gets expire_at_ms",
			seed: join(sale(loaded(groupMeta()), 10, nil), [][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2},
				{"PEXPIRE", act.Forming(), 3_600_000}, {"ZADD", act.Unsettled(), at(5 * time.Minute), gid2}}),
			script: openGroupScript, keys: keys, args: args(""),
			want: ok,
			after: merge(opened(loaded(groupMeta()), saleEndTTL), state{
				act.Forming():   zsetOf("ttl~3600s", gid2, at(5*time.Minute), gid, at(10*time.Minute)),
				act.Unsettled(): zsetOf(saleEndTTL, gid2, at(5*time.Minute), gid, at(10*time.Minute)),
			}),
		},
		{
			name: "an order number already taken (13): nothing changes, the key is not remembered",
			seed: join(sale(groupMeta(), 10, nil), orderSeed(otherOrder)), script: openGroupScript, keys: keys, args: args("key-1"),
			want: refused(13, 0), after: merge(untouched, orderState(otherOrder)),
		},
		{
			name: "a group id already taken (13): nothing changes, the key is not remembered",
			seed: join(sale(groupMeta(), 10, nil), groupSeed(otherGroup, fields{"8": no0})), script: openGroupScript, keys: keys, args: args("key-1"),
			want: refused(13, 0), after: merge(untouched, groupState(otherGroup, fields{"8": no0})),
		},
		{
			name: "a group id a record cannot hold (a '|', lib_record's separator) (13): nothing changes",
			seed: sale(groupMeta(), 10, nil), script: openGroupScript,
			keys: groupKeys(act, gid+"|1"), args: []any{7, 1, no1, gid + "|1", openKey},
			want: refused(13, 0), after: untouched,
		},
		{
			name: "the open that takes the sale's last unit marks its order with the sale's version (soldout: activity.sold_out)",
			seed: sale(loaded(groupMeta()), 1, nil), script: openGroupScript, keys: keys, args: args(""),
			want: []any{int64(0), int64(0), "now+600s", "now+60s", int64(999), no1, ""},
			after: merge(opened(loaded(groupMeta()), saleEndTTL), state{
				act.Stock:  "0 " + saleTTL,
				act.Orders: ordersOf(saleEndTTL, no1, newOrder(7, 1, 999, gid).with("soldout", 3)),
			}),
		},
		{
			name: "open on a flash sale (8)", seed: sale(flashMeta(), 10, nil),
			script: openGroupScript, keys: keys, args: args("key-1"),
			want: refused(8, 10), after: saleState(flashMeta(), 10, nil),
		},
		{
			name: "open when sold out (5)", seed: sale(groupMeta(), 0, fields{"8": 2}),
			script: openGroupScript, keys: keys, args: args(""),
			want: refused(5, 0), after: saleState(groupMeta(), 0, fields{"8": 2}),
		},
	})
}

func TestJoinGroupScript_table(t *testing.T) {
	keys := enterKeys()
	args := func(user int64, key string) []any { return enterArgs("join", user, key) }
	// User 8 opened gid (of size 3 unless said) a minute ago.
	meta := groupMeta().with("accepted", 1, "groups_opened", 1)
	forming := group("forming", 3, 1, 0, at(10*time.Minute)).with("leader", 8)
	leader := fields{"8": no0}
	listed := zsetOf(persist, gid, at(10*time.Minute))
	opened := func(meta, g fields, ms fields) [][]any {
		return join(sale(meta, 9, fields{"8": 1}), groupSeed(g, ms),
			[][]any{{"ZADD", act.Forming(), at(10 * time.Minute), gid}, {"ZADD", act.Unsettled(), at(10 * time.Minute), gid}})
	}
	openedState := func(meta, g fields, ms fields) state {
		return merge(saleState(meta, 9, fields{"8": 1}), groupState(g, ms), state{act.Forming(): listed, act.Unsettled(): listed})
	}
	// joined: user 7 joined g in a sale of meta; the keys it created
	// (the orders hash, the outbox) with ttl.
	joined := func(meta, g fields, ttl string) state {
		return merge(saleState(meta.with("accepted", 2), 8, fields{"7": 1, "8": 1}),
			groupState(g, fields{"8": no0, "7": no1}), state{
				act.Orders:      ordersOf(ttl, no1, newOrder(7, 1, 999, gid)),
				act.Outbox:      zsetOf(ttl, no1, at(0)),
				act.Unsettled(): listed,
			})
	}
	ok := []any{int64(0), int64(8), "now+600s", "now+60s", int64(999), no1, ""}
	refused := func(code int64, expires any) []any { return []any{code, int64(0), expires, int64(0), int64(0), "", ""} }
	otherOrder := placed(999, gid2) // another order standing at no1

	runScriptCases(t, []scriptCase{
		{
			name: "join: the order, a member more, still forming and listed", seed: opened(meta, forming, leader),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: ok, after: merge(joined(meta, forming.with("members", 2), persist), state{act.Forming(): listed}),
		},
		{
			name: "the join that fills the group takes it off the forming zset", seed: opened(meta, forming.with("size", 2), leader),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: ok, after: joined(meta, forming.with("size", 2, "members", 2), persist),
		},
		{
			name:   "join with an Idempotency-Key remembers it under join: (the same key used to open is another)",
			seed:   join(opened(meta, forming, leader), fields{openKey: no2}.hset(act.Idem, saleTTLms)),
			script: joinGroupScript, keys: keys, args: args(7, "key-1"),
			want: ok,
			after: merge(joined(meta, forming.with("members", 2), persist),
				state{act.Forming(): listed, act.Idem: fields{joinKey: no1, openKey: no2}.hash(saleTTL)}),
		},
		{
			name:   "a key that joined replays its order (7) and changes nothing",
			seed:   join(opened(meta, forming, leader), fields{joinKey: no0}.hset(act.Idem, saleTTLms)),
			script: joinGroupScript, keys: keys, args: args(7, "key-1"),
			want:  []any{int64(7), int64(0), int64(0), int64(0), int64(0), no0, ""},
			after: merge(openedState(meta, forming, leader), state{act.Idem: fields{joinKey: no0}.hash(saleTTL)}),
		},
		{
			name: "a loaded sale: the orders hash and outbox created expire at expire_at_ms, the users hash keeps its ttl",
			seed: opened(loaded(meta), forming, leader), script: joinGroupScript, keys: keys, args: args(7, ""),
			want: ok, after: merge(joined(loaded(meta), forming.with("members", 2), saleEndTTL), state{act.Forming(): listed}),
		},
		{
			name: "an order number already taken (13): nothing changes, the key is not remembered",
			seed: join(opened(meta, forming, leader), orderSeed(otherOrder)), script: joinGroupScript, keys: keys, args: args(7, "key-1"),
			want: refused(13, "now+600s"), after: merge(openedState(meta, forming, leader), orderState(otherOrder)),
		},
		{
			name:   "the join that takes the sale's last unit marks its order with the sale's version (soldout: activity.sold_out)",
			seed:   join(opened(loaded(meta), forming, leader), [][]any{{"SET", act.Stock, 1, "PX", saleTTLms}}),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: []any{int64(0), int64(0), "now+600s", "now+60s", int64(999), no1, ""},
			after: merge(joined(loaded(meta), forming.with("members", 2), saleEndTTL), state{
				act.Forming(): listed,
				act.Stock:     "0 " + saleTTL,
				act.Orders:    ordersOf(saleEndTTL, no1, newOrder(7, 1, 999, gid).with("soldout", 3)),
			}),
		},
		{
			name: "no such group (9)", seed: sale(meta, 9, fields{"8": 1}),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: refused(9, int64(0)), after: saleState(meta, 9, fields{"8": 1}),
		},
		{
			name: "a succeeded group is closed (10)", seed: opened(meta, forming.with("status", "succeeded"), leader),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: refused(10, "now+600s"), after: openedState(meta, forming.with("status", "succeeded"), leader),
		},
		{
			name: "a forming group past its deadline is closed (10)", seed: opened(meta, forming.with("expires_ms", at(-time.Second)), leader),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want: refused(10, "now-1s"), after: openedState(meta, forming.with("expires_ms", at(-time.Second)), leader),
		},
		{
			name: "already a member (11)", seed: opened(meta, forming, leader),
			script: joinGroupScript, keys: keys, args: args(8, "key-1"),
			want: refused(11, "now+600s"), after: openedState(meta, forming, leader),
		},
		{
			name: "full (12)", seed: opened(meta, forming.with("members", 3), fields{"8": no0, "9": no2, "6": "1-DDDDDDDDDDDDDDDD"}),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want:  refused(12, "now+600s"),
			after: openedState(meta, forming.with("members", 3), fields{"8": no0, "9": no2, "6": "1-DDDDDDDDDDDDDDDD"}),
		},
		{
			name: "the sale's rules still apply (3: closed)", seed: join(opened(meta, forming, leader), meta.with("status", "closed").hset(act.Meta, 0)),
			script: joinGroupScript, keys: keys, args: args(7, ""),
			want:  []any{int64(3), int64(9), "now+600s", int64(0), int64(0), "", ""},
			after: merge(openedState(meta, forming, leader), state{act.Meta: meta.with("status", "closed").hash(saleTTL)}),
		},
	})
}

func TestSettleGroupScript_table(t *testing.T) {
	keys := []string{act.Meta, act.Group(gid), act.GroupMembers(gid), act.Forming(), act.Unsettled()}
	meta := groupMeta().with("accepted", 2, "groups_opened", 1)
	members := fields{"8": no0, "7": no1} // seeded in name order: 7, then 8
	open := group("forming", 3, 2, 1, at(10*time.Minute))
	due := open.with("expires_ms", at(-time.Second))
	succeeded := group("succeeded", 2, 2, 2, at(10*time.Minute)).with("succeeded_ms", at(-time.Second))
	failed := due.with("status", "failed", "failed_ms", at(-time.Second))
	seeded := func(g fields, forming, unsettled bool) [][]any {
		cmds := join(meta.hset(act.Meta, saleTTLms), groupSeed(g, members), [][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2}})
		if forming {
			cmds = append(cmds, []any{"ZADD", act.Forming(), g["expires_ms"], gid})
		}
		if unsettled {
			cmds = append(cmds, []any{"ZADD", act.Unsettled(), g["expires_ms"], gid})
		}
		return cmds
	}
	after := func(m, g fields, forming, unsettled []any) state {
		s := merge(state{act.Meta: m.hash(saleTTL)}, groupState(g, members),
			state{act.Forming(): zsetOf(persist, append([]any{gid2, at(5 * time.Minute)}, forming...)...)})
		if len(unsettled) > 0 {
			s[act.Unsettled()] = zsetOf(persist, unsettled...)
		}
		return s
	}

	runScriptCases(t, []scriptCase{
		{
			name: "before the deadline: still forming, nothing changes", seed: seeded(open, true, true),
			script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"forming", "now+600s"},
			after: after(meta, open, []any{gid, at(10 * time.Minute)}, []any{gid, at(10 * time.Minute)}),
		},
		{
			name: "after the deadline, the sale's keys gone: failed, but no meta is brought back to count it",
			seed: groupSeed(due, members), script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"failed", "now-1s", no1, no0},
			after: groupState(due.with("status", "failed", "failed_ms", at(0)), members),
		},
		{
			name: "after the deadline: failed, off the forming and unsettled zsets, counted, its orders returned",
			seed: seeded(due, true, true), script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"failed", "now-1s", no1, no0},
			after: after(meta.with("groups_failed", 1), due.with("status", "failed", "failed_ms", at(0)), nil, nil),
		},
		{
			name: "a full group past its deadline (not in forming) fails too", seed: seeded(due.with("members", 3), false, true),
			script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"failed", "now-1s", no1, no0},
			after: after(meta.with("groups_failed", 1), due.with("members", 3, "status", "failed", "failed_ms", at(0)), nil, nil),
		},
		{
			name: "a succeeded group stays succeeded, off the unsettled zset, before its deadline too",
			seed: seeded(succeeded, false, true), script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"succeeded", "now+600s", no1, no0},
			after: after(meta, succeeded, nil, nil),
		},
		{
			name: "settling a failed group again changes nothing (not counted twice)",
			seed: seeded(failed, false, false), script: settleScript, keys: keys, args: []any{gid},
			want:  []any{"failed", "now-1s", no1, no0},
			after: after(meta, failed, nil, nil),
		},
		{
			name: "no such group", seed: meta.hset(act.Meta, saleTTLms),
			script: settleScript, keys: keys, args: []any{gid},
			want: []any{"", "0"}, after: state{act.Meta: meta.hash(saleTTL)},
		},
	})
}
