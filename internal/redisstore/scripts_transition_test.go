package redisstore

import (
	"testing"
	"time"
)

// changedTo is o after transition.lua moved it to status with fence 5:
// stamped now, and on the outbox since now.
func changedTo(o rec, status string) state {
	return state{
		act.Orders: ordersOf(saleTTL, no1, o.with("status", status, "fence", 5, status+"_ms", at(0))),
		act.Outbox: zsetOf(persist, no1, at(0)),
	}
}

// cancelledBy is changedTo(o, "cancelled") with the reason the cancel
// records (shopper, timeout, group_failed: order.cancelled's reason).
func cancelledBy(o rec, reason string) state { return changedTo(o.with("reason", reason), "cancelled") }

// group is gid, led by user 8, opened a minute ago.
func group(status string, size, members, paid int, expires at) fields {
	return fields{
		"status": status, "size": size, "members": members, "paid": paid, "leader": 8,
		"expires_ms": expires, "created_ms": at(-time.Minute),
	}
}

func groupSeed(g, members fields) [][]any {
	return join(g.hset(act.Group(gid), saleTTLms), members.hset(act.GroupMembers(gid), saleTTLms))
}

func groupState(g, members fields) state {
	return state{act.Group(gid): g.hash(saleTTL), act.GroupMembers(gid): members.hash(saleTTL)}
}

func TestTransitionScript_table(t *testing.T) {
	keys := func(group string) []string {
		g := group
		if g == "" {
			g = "-" // as the store names an order's missing group
		}
		return []string{act.Meta, act.Stock, act.Users, act.Orders, act.Group(g), act.GroupMembers(g), act.Forming(), act.Outbox,
			act.Items, act.ItemUsers}
	}
	args := func(what string, fence int, user, group string) []any {
		return []any{what, fence, act.Restock, user, group, no1}
	}

	// A flash sale: users 7 and 8 hold one unit each, 8 left.
	meta, users := flashMeta().with("accepted", 2), fields{"7": 1, "8": 1}
	pending := placed(1999, "")
	paid := pending.with("status", "paid", "fence", 3, "paid_ms", at(-5*time.Second))
	overdue := pending.with("created_ms", at(-70*time.Second), "pay_by_ms", at(-10*time.Second))
	flash := func(o rec) [][]any { return join(sale(meta, 8, users), orderSeed(o)) }
	flashState := func(o rec) state { return merge(saleState(meta, 8, users), orderState(o)) }
	back := saleState(meta.with("returned", 1), 9, fields{"8": 1}) // user 7's unit returned

	// A group buy: groups of 2; user 8 leads gid and paid, user 7 joined.
	gmeta := groupMeta().with("accepted", 2, "groups_opened", 1)
	member := placed(999, gid)
	members := fields{"8": no0, "7": no1}
	failed := group("failed", 2, 2, 1, at(-10*time.Second)).with("failed_ms", at(-5*time.Second))
	full := group("forming", 2, 2, 1, at(10*time.Minute))
	inGroup := func(g, ms fields, o rec, stock int, us fields) [][]any {
		return join(sale(gmeta, stock, us), groupSeed(g, ms), orderSeed(o))
	}
	inGroupState := func(g, ms fields, o rec, stock int, us fields) state {
		return merge(saleState(gmeta, stock, us), groupState(g, ms), orderState(o))
	}
	gback := saleState(gmeta.with("returned", 1), 9, fields{"8": 1})
	// A group of 3 with a free slot after user 7 leaves.
	three := group("forming", 3, 3, 1, at(10*time.Minute))
	members3 := fields{"8": no0, "7": no1, "9": no2}
	users3 := fields{"7": 1, "8": 1, "9": 1}

	runScriptCases(t, []scriptCase{
		{
			name: "pay: paid, fenced, stamped, back on the outbox as of now, stock unchanged", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want:  []any{int64(0), "paid", int64(5), recordAfter, int64(1)},
			after: merge(saleState(meta, 8, users), changedTo(pending, "paid")),
		},
		{
			name:   "pay run again with its fence (an answer lost, the script sent again): the same answer, the record as it is, off the outbox",
			seed:   join(sale(meta, 8, users), orders(no1, paid.with("fence", 5, "persisted", 1))),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want:  []any{int64(0), "paid", int64(5), recordAfter, int64(0)},
			after: merge(saleState(meta, 8, users), state{act.Orders: ordersOf(saleTTL, no1, paid.with("fence", 5, "persisted", 1))}),
		},
		{
			name: "pay with a fence not above a new record's missing fence, read as 0 (5)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 0, "7", ""),
			want: []any{int64(35), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "an unknown action (8) changes nothing", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("bogus", 5, "7", ""),
			want: []any{int64(38), "", int64(0)}, after: flashState(pending),
		},
		{
			name: "pay by another user (1)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "8", ""),
			want: []any{int64(31), "", int64(0)}, after: flashState(pending),
		},
		{
			name: "pay of no order (1) creates nothing", seed: sale(meta, 8, users),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(31), "", int64(0)}, after: saleState(meta, 8, users),
		},
		{
			name: "pay after pay_by (3)", seed: flash(overdue),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(33), "pending_payment", int64(0)}, after: flashState(overdue),
		},
		{
			name:   "cancel of a persisted order: units back, the user's entry gone, returned counted, back on the outbox, others kept",
			seed:   join(sale(meta, 8, users), orders(no1, pending.with("persisted", 1)), outboxed(no0, at(-time.Minute))),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(back, state{
				act.Orders: ordersOf(saleTTL, no1, pending.with("status", "cancelled", "fence", 5, "cancelled_ms", at(0), "persisted", 1, "reason", "shopper")),
				act.Outbox: zsetOf(persist, no0, at(-time.Minute), no1, at(0)),
			}),
		},
		{
			name: "cancel of a paid order (2)", seed: flash(paid),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(32), "paid", int64(3)}, after: flashState(paid),
		},
		{
			name: "expire before pay_by (4)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want: []any{int64(34), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "expire after pay_by: cancelled, units back", seed: flash(overdue),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)}, after: merge(back, cancelledBy(overdue, "timeout")),
		},
		{
			name:   "expire in a sold-out sale: the unit back, restock published",
			seed:   join(sale(meta.with("total", 2), 0, users), orderSeed(overdue)),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want:      []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after:     merge(saleState(meta.with("total", 2, "returned", 1), 1, fields{"8": 1}), cancelledBy(overdue, "timeout")),
			published: []string{act.Restock + " 1"},
		},
		{
			name:   "stock never goes above the total: cancel with stock at total keeps it there",
			seed:   join(sale(meta, 10, users), orderSeed(pending)),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want:  []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(meta.with("returned", 1), 10, fields{"8": 1}), cancelledBy(pending, "shopper")),
		},
		{
			name: "refund of a paid flash-sale order (6: no failed group)", seed: flash(paid),
			script: transitionScript, keys: keys(""), args: args("refund", 5, "", ""),
			want: []any{int64(36), "paid", int64(3)}, after: flashState(paid),
		},
		{
			name: "settle of a pending flash-sale order (6)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("settle", 5, "", ""),
			want: []any{int64(36), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "settle an unpaid member of a failed group: cancelled, units back, group untouched",
			seed: inGroup(failed, members, member, 8, users), script: transitionScript, keys: keys(gid), args: args("settle", 5, "", gid),
			want:  []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(gback, groupState(failed, members), cancelledBy(member, "group_failed")),
		},
		{
			name: "refund a paid member of a failed group: refunded, units back",
			seed: inGroup(failed, members, member.with("status", "paid", "fence", 3), 8, users), script: transitionScript, keys: keys(gid), args: args("refund", 5, "", gid),
			want:  []any{int64(0), "refunded", int64(5), recordAfter, int64(1)},
			after: merge(gback, groupState(failed, members), changedTo(member.with("status", "paid", "fence", 3), "refunded")),
		},
		{
			name: "refund again (2) changes nothing",
			seed: inGroup(failed, members, member.with("status", "refunded", "fence", 5), 9, fields{"8": 1}), script: transitionScript, keys: keys(gid), args: args("refund", 6, "", gid),
			want:  []any{int64(32), "refunded", int64(5)},
			after: inGroupState(failed, members, member.with("status", "refunded", "fence", 5), 9, fields{"8": 1}),
		},
		{
			name: "refund with a fence not above the order's (5)",
			seed: inGroup(failed, members, member.with("status", "paid", "fence", 5), 8, users), script: transitionScript, keys: keys(gid), args: args("refund", 5, "", gid),
			want:  []any{int64(35), "paid", int64(5)},
			after: inGroupState(failed, members, member.with("status", "paid", "fence", 5), 8, users),
		},
		{
			name: "the pay that completes a group of 2 succeeds it and takes it off the forming zset",
			seed: join(inGroup(full, members, member, 8, users),
				[][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2, at(10 * time.Minute), gid}}),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want: []any{int64(0), "paid", int64(5), recordAfter, int64(1)},
			after: merge(saleState(gmeta.with("groups_succeeded", 1), 8, users), changedTo(member, "paid"),
				groupState(full.with("status", "succeeded", "paid", 2, "succeeded_ms", at(0)), members),
				state{act.Forming(): zsetOf(persist, gid2, at(5*time.Minute))}),
		},
		{
			name: "pay into a failed group (7)", seed: inGroup(failed, members, member, 8, users),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want:  []any{int64(37), "pending_payment", int64(0)},
			after: inGroupState(failed, members, member, 8, users),
		},
		{
			name:   "pay into a forming group past its deadline (7)",
			seed:   inGroup(full.with("expires_ms", at(-time.Second)), members, member, 8, users),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want:  []any{int64(37), "pending_payment", int64(0)},
			after: inGroupState(full.with("expires_ms", at(-time.Second)), members, member, 8, users),
		},
		{
			name: "an unpaid member cancelling in a forming group frees the slot and lists the group again",
			seed: inGroup(three, members3, member, 7, users3), script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(gmeta.with("returned", 1), 8, fields{"8": 1, "9": 1}), cancelledBy(member, "shopper"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}),
				state{act.Forming(): zsetOf(persist, gid, at(10*time.Minute))}),
		},
		{
			name:   "an unpaid member expiring past the group's deadline frees the slot but does not list the group",
			seed:   inGroup(three.with("expires_ms", at(-time.Second)), members3, member.with("pay_by_ms", at(-2*time.Second)), 7, users3),
			script: transitionScript, keys: keys(gid), args: args("expire", 5, "", gid),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(gmeta.with("returned", 1), 8, fields{"8": 1, "9": 1}),
				cancelledBy(member.with("pay_by_ms", at(-2*time.Second)), "timeout"),
				groupState(three.with("expires_ms", at(-time.Second), "members", 2), fields{"8": no0, "9": no2})),
		},
		{
			name: "cancel in a sale whose meta expired first: the order changes, no meta, stock or users key is created, nothing published",
			seed: orderSeed(pending), script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)}, after: cancelledBy(pending, "shopper"),
		},
		{
			name: "settle in a failed group whose sale's meta expired first: cancelled, nothing given back or created",
			seed: join(groupSeed(failed, members), orderSeed(member)), script: transitionScript, keys: keys(gid), args: args("settle", 5, "", gid),
			want:  []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(groupState(failed, members), cancelledBy(member, "group_failed")),
		},
		{
			name: "pay in a loaded sale: the outbox, without a ttl, gets expire_at_ms",
			seed: join(sale(loaded(meta), 8, users), orderSeed(pending)), script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(0), "paid", int64(5), recordAfter, int64(1)},
			after: merge(saleState(loaded(meta), 8, users), changedTo(pending, "paid"),
				state{act.Outbox: zsetOf(saleEndTTL, no1, at(0))}),
		},
		{
			name:   "cancel in a loaded sale: an outbox with a ttl keeps it",
			seed:   join(sale(loaded(meta), 8, users), orderSeed(pending), [][]any{{"PEXPIRE", act.Outbox, 3_600_000}}),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(loaded(meta).with("returned", 1), 9, fields{"8": 1}), cancelledBy(pending, "shopper"),
				state{act.Outbox: zsetOf("ttl~3600s", no1, at(0))}),
		},
		{
			name:   "a member leaving a loaded group buy lists the group on a new forming zset, expiring with the outbox at expire_at_ms",
			seed:   join(sale(loaded(gmeta), 7, users3), groupSeed(three, members3), orderSeed(member)),
			script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(loaded(gmeta).with("returned", 1), 8, fields{"8": 1, "9": 1}), cancelledBy(member, "shopper"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}), state{
					act.Forming(): zsetOf(saleEndTTL, gid, at(10*time.Minute)),
					act.Outbox:    zsetOf(saleEndTTL, no1, at(0)),
				}),
		},
		{
			name: "a member leaving a loaded group buy: a forming zset with a ttl keeps it",
			seed: join(sale(loaded(gmeta), 7, users3), groupSeed(three, members3), orderSeed(member),
				[][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2}, {"PEXPIRE", act.Forming(), 3_600_000}}),
			script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5), recordAfter, int64(1)},
			after: merge(saleState(loaded(gmeta).with("returned", 1), 8, fields{"8": 1, "9": 1}), cancelledBy(member, "shopper"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}), state{
					act.Forming(): zsetOf("ttl~3600s", gid2, at(5*time.Minute), gid, at(10*time.Minute)),
					act.Outbox:    zsetOf(saleEndTTL, no1, at(0)),
				}),
		},
	})
}

func TestPersistedScript_table(t *testing.T) {
	keys := []string{act.Orders, act.Outbox}
	o := newOrder(7, 1, 1999, "").with("status", "paid", "fence", 5, "created_ms", at(-time.Minute),
		"pay_by_ms", at(0), "paid_ms", at(-30*time.Second))
	outbox := outboxed(no0, at(-time.Minute), no1, at(-30*time.Second))
	runScriptCases(t, []scriptCase{
		{
			name: "the state written is the order's: off the outbox, the record untouched", seed: join(orders(no1, o), outbox),
			script: persistedScript, keys: keys, args: []any{no1, 5}, want: []any{int64(1)},
			after: state{
				act.Orders: ordersOf(saleTTL, no1, o),
				act.Outbox: zsetOf(persist, no0, at(-time.Minute)),
			},
		},
		{
			name: "the order changed since it was read (2): it stays on the outbox", seed: join(orders(no1, o), outbox),
			script: persistedScript, keys: keys, args: []any{no1, 4}, want: []any{int64(2)},
			after: state{
				act.Orders: ordersOf(saleTTL, no1, o),
				act.Outbox: zsetOf(persist, no0, at(-time.Minute), no1, at(-30*time.Second)),
			},
		},
		{
			name: "already off the outbox: nothing changes", seed: join(orders(no1, o), outboxed(no0, at(-time.Minute))),
			script: persistedScript, keys: keys, args: []any{no1, 5}, want: []any{int64(1)},
			after: state{
				act.Orders: ordersOf(saleTTL, no1, o),
				act.Outbox: zsetOf(persist, no0, at(-time.Minute)),
			},
		},
		{
			name:   "a record never changed (fence left off, read as 0): off the outbox",
			seed:   join(orders(no1, newOrder(7, 1, 1999, "")), outbox),
			script: persistedScript, keys: keys, args: []any{no1, 0}, want: []any{int64(1)},
			after: state{
				act.Orders: ordersOf(saleTTL, no1, newOrder(7, 1, 1999, "")),
				act.Outbox: zsetOf(persist, no0, at(-time.Minute)),
			},
		},
		{
			name: "the record is gone (0): nothing created", seed: outbox,
			script: persistedScript, keys: keys, args: []any{no1, 5}, want: []any{int64(0)},
			after: state{act.Outbox: zsetOf(persist, no0, at(-time.Minute), no1, at(-30*time.Second))},
		},
		{
			name: "a batch: each order as on its own, one ZREM for all",
			seed: join(orders(no1, o, no0, o.with("fence", 3), no2, o.with("fence", 9)), outbox,
				outboxed(no2, at(-20*time.Second), "other", at(-10*time.Second))),
			script: persistedScript, keys: keys, args: []any{no1, 5, no0, 3, no2, 8, "1-GONE", 1},
			want: []any{int64(1), int64(1), int64(2), int64(0)},
			after: state{
				act.Orders: ordersOf(saleTTL, no1, o, no0, o.with("fence", 3),
					no2, o.with("fence", 9)),
				act.Outbox: zsetOf(persist, no2, at(-20*time.Second), "other", at(-10*time.Second)),
			},
		},
	})
}
