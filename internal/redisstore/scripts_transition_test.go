package redisstore

import (
	"testing"
	"time"
)

// placed is order no1 of user 7, one unit, accepted ten seconds ago: its
// accept's outbox entry 1-1 is still there. Written as accept.lua writes it
// now, without its defaults (fence, persisted, group, amount).
func placed(price int, group string) fields {
	f := fields{
		"user": 7, "qty": 1, "price": price, "status": "pending_payment",
		"created_ms": at(-10 * time.Second), "pay_by_ms": at(50 * time.Second), "outbox": "1-1",
	}
	if group != "" {
		f["group"] = group
	}
	return f
}

// placedBefore is placed as records were written until 2026-11-23, every
// field spelled out: the scripts read both.
func placedBefore(price int, group string) fields {
	return placed(price, group).with("amount", price, "fence", 0, "persisted", 0, "group", group)
}

// orderSeed writes no1's record o and, if o names one, its outbox entry.
func orderSeed(o fields) [][]any {
	cmds := o.hset(act.Order(no1), retention)
	if id := o["outbox"].(string); id != "" {
		cmds = append(cmds, []any{"XADD", act.Outbox, id, "o", no1})
	}
	return cmds
}

// orderState is the state orderSeed writes.
func orderState(o fields) state {
	s := state{act.Order(no1): o.hash(kept)}
	if id := o["outbox"].(string); id != "" {
		s[act.Outbox] = streamOf(persist, id+" o="+no1)
	}
	return s
}

// changedTo is o after transition.lua moved it to status with fence 5:
// stamped now, with one new outbox entry in place of the old.
func changedTo(o fields, status string) state {
	return state{
		act.Order(no1): o.with("status", status, "fence", 5, status+"_ms", at(0), "outbox", "<entry>").hash(kept),
		act.Outbox:     streamOf(persist, "<entry> o="+no1),
	}
}

// group is gid, led by user 8, opened a minute ago.
func group(status string, size, members, paid int, expires at) fields {
	return fields{
		"status": status, "size": size, "members": members, "paid": paid, "leader": 8,
		"expires_ms": expires, "created_ms": at(-time.Minute),
	}
}

func groupSeed(g, members fields) [][]any {
	return join(g.hset(act.Group(gid), retention), members.hset(act.GroupMembers(gid), retention))
}

func groupState(g, members fields) state {
	return state{act.Group(gid): g.hash(kept), act.GroupMembers(gid): members.hash(kept)}
}

func TestTransitionScript_table(t *testing.T) {
	keys := func(group string) []string {
		g := group
		if g == "" {
			g = "-" // as the store names an order's missing group
		}
		return []string{act.Meta, act.Stock, act.Users, act.Order(no1), act.Group(g), act.GroupMembers(g), act.Forming(), act.Outbox}
	}
	args := func(what string, fence int, user, group string) []any {
		return []any{what, fence, act.Restock, user, group, no1}
	}

	// A flash sale: users 7 and 8 hold one unit each, 8 left.
	meta, users := flashMeta().with("accepted", 2), fields{"7": 1, "8": 1}
	pending := placed(1999, "")
	paid := pending.with("status", "paid", "fence", 3, "paid_ms", at(-5*time.Second))
	overdue := pending.with("created_ms", at(-70*time.Second), "pay_by_ms", at(-10*time.Second))
	flash := func(o fields) [][]any { return join(sale(meta, 8, users), orderSeed(o)) }
	flashState := func(o fields) state { return merge(saleState(meta, 8, users), orderState(o)) }
	back := saleState(meta.with("returned", 1), 9, fields{"8": 1}) // user 7's unit returned

	// A group buy: groups of 2; user 8 leads gid and paid, user 7 joined.
	gmeta := groupMeta().with("accepted", 2, "groups_opened", 1)
	member := placed(999, gid)
	members := fields{"8": no0, "7": no1}
	failed := group("failed", 2, 2, 1, at(-10*time.Second)).with("failed_ms", at(-5*time.Second))
	full := group("forming", 2, 2, 1, at(10*time.Minute))
	inGroup := func(g, ms fields, o fields, stock int, us fields) [][]any {
		return join(sale(gmeta, stock, us), groupSeed(g, ms), orderSeed(o))
	}
	inGroupState := func(g, ms fields, o fields, stock int, us fields) state {
		return merge(saleState(gmeta, stock, us), groupState(g, ms), orderState(o))
	}
	gback := saleState(gmeta.with("returned", 1), 9, fields{"8": 1})
	// A group of 3 with a free slot after user 7 leaves.
	three := group("forming", 3, 3, 1, at(10*time.Minute))
	members3 := fields{"8": no0, "7": no1, "9": no2}
	users3 := fields{"7": 1, "8": 1, "9": 1}

	runScriptCases(t, []scriptCase{
		{
			name: "pay: paid, fenced, stamped, the accept's entry replaced by one new entry, stock unchanged", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want:  []any{int64(0), "paid", int64(5)},
			after: merge(saleState(meta, 8, users), changedTo(pending, "paid")),
		},
		{
			name: "pay of a record written before its defaults were left out: the same", seed: flash(placedBefore(1999, "")),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want:  []any{int64(0), "paid", int64(5)},
			after: merge(saleState(meta, 8, users), changedTo(placedBefore(1999, ""), "paid")),
		},
		{
			name: "pay with a fence not above an old-style record's 0 (5)", seed: flash(placedBefore(1999, "")),
			script: transitionScript, keys: keys(""), args: args("pay", 0, "7", ""),
			want: []any{int64(5), "pending_payment", int64(0)}, after: flashState(placedBefore(1999, "")),
		},
		{
			name: "pay with a fence not above a new record's missing fence, read as 0 (5)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 0, "7", ""),
			want: []any{int64(5), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "an unknown action (8) changes nothing", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("bogus", 5, "7", ""),
			want: []any{int64(8), "", int64(0)}, after: flashState(pending),
		},
		{
			name: "pay by another user (1)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "8", ""),
			want: []any{int64(1), "", int64(0)}, after: flashState(pending),
		},
		{
			name: "pay of no order (1) creates nothing", seed: sale(meta, 8, users),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(1), "", int64(0)}, after: saleState(meta, 8, users),
		},
		{
			name: "pay after pay_by (3)", seed: flash(overdue),
			script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(3), "pending_payment", int64(0)}, after: flashState(overdue),
		},
		{
			name: "cancel: units back, the user's entry gone, returned counted, one new entry, others kept",
			seed: join(sale(meta, 8, users), orderSeed(pending.with("outbox", "", "persisted", 1)),
				[][]any{{"XADD", act.Outbox, "1-1", "o", no0}}),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(back, state{
				act.Order(no1): pending.with("status", "cancelled", "fence", 5, "cancelled_ms", at(0), "outbox", "<entry>", "persisted", 1).hash(kept),
				act.Outbox:     streamOf(persist, "1-1 o="+no0, "<entry> o="+no1),
			}),
		},
		{
			name: "cancel of a paid order (2)", seed: flash(paid),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(2), "paid", int64(3)}, after: flashState(paid),
		},
		{
			name: "expire before pay_by (4)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want: []any{int64(4), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "expire after pay_by: cancelled, units back", seed: flash(overdue),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want: []any{int64(0), "cancelled", int64(5)}, after: merge(back, changedTo(overdue, "cancelled")),
		},
		{
			name:   "expire in a sold-out sale: the unit back, restock published",
			seed:   join(sale(meta.with("total", 2), 0, users), orderSeed(overdue)),
			script: transitionScript, keys: keys(""), args: args("expire", 5, "", ""),
			want:      []any{int64(0), "cancelled", int64(5)},
			after:     merge(saleState(meta.with("total", 2, "returned", 1), 1, fields{"8": 1}), changedTo(overdue, "cancelled")),
			published: []string{act.Restock + " 1"},
		},
		{
			name:   "stock never goes above the total: cancel with stock at total keeps it there",
			seed:   join(sale(meta, 10, users), orderSeed(pending)),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want:  []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(meta.with("returned", 1), 10, fields{"8": 1}), changedTo(pending, "cancelled")),
		},
		{
			name: "refund of a paid flash-sale order (6: no failed group)", seed: flash(paid),
			script: transitionScript, keys: keys(""), args: args("refund", 5, "", ""),
			want: []any{int64(6), "paid", int64(3)}, after: flashState(paid),
		},
		{
			name: "settle of a pending flash-sale order (6)", seed: flash(pending),
			script: transitionScript, keys: keys(""), args: args("settle", 5, "", ""),
			want: []any{int64(6), "pending_payment", int64(0)}, after: flashState(pending),
		},
		{
			name: "settle an unpaid member of a failed group: cancelled, units back, group untouched",
			seed: inGroup(failed, members, member, 8, users), script: transitionScript, keys: keys(gid), args: args("settle", 5, "", gid),
			want:  []any{int64(0), "cancelled", int64(5)},
			after: merge(gback, groupState(failed, members), changedTo(member, "cancelled")),
		},
		{
			name: "refund a paid member of a failed group: refunded, units back",
			seed: inGroup(failed, members, member.with("status", "paid", "fence", 3), 8, users), script: transitionScript, keys: keys(gid), args: args("refund", 5, "", gid),
			want:  []any{int64(0), "refunded", int64(5)},
			after: merge(gback, groupState(failed, members), changedTo(member.with("status", "paid", "fence", 3), "refunded")),
		},
		{
			name: "refund again (2) changes nothing",
			seed: inGroup(failed, members, member.with("status", "refunded", "fence", 5), 9, fields{"8": 1}), script: transitionScript, keys: keys(gid), args: args("refund", 6, "", gid),
			want:  []any{int64(2), "refunded", int64(5)},
			after: inGroupState(failed, members, member.with("status", "refunded", "fence", 5), 9, fields{"8": 1}),
		},
		{
			name: "refund with a fence not above the order's (5)",
			seed: inGroup(failed, members, member.with("status", "paid", "fence", 5), 8, users), script: transitionScript, keys: keys(gid), args: args("refund", 5, "", gid),
			want:  []any{int64(5), "paid", int64(5)},
			after: inGroupState(failed, members, member.with("status", "paid", "fence", 5), 8, users),
		},
		{
			name: "the pay that completes a group of 2 succeeds it and takes it off the forming zset",
			seed: join(inGroup(full, members, member, 8, users),
				[][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2, at(10 * time.Minute), gid}}),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want: []any{int64(0), "paid", int64(5)},
			after: merge(saleState(gmeta.with("groups_succeeded", 1), 8, users), changedTo(member, "paid"),
				groupState(full.with("status", "succeeded", "paid", 2, "succeeded_ms", at(0)), members),
				state{act.Forming(): zsetOf(persist, gid2, at(5*time.Minute))}),
		},
		{
			name: "pay into a failed group (7)", seed: inGroup(failed, members, member, 8, users),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want:  []any{int64(7), "pending_payment", int64(0)},
			after: inGroupState(failed, members, member, 8, users),
		},
		{
			name:   "pay into a forming group past its deadline (7)",
			seed:   inGroup(full.with("expires_ms", at(-time.Second)), members, member, 8, users),
			script: transitionScript, keys: keys(gid), args: args("pay", 5, "7", gid),
			want:  []any{int64(7), "pending_payment", int64(0)},
			after: inGroupState(full.with("expires_ms", at(-time.Second)), members, member, 8, users),
		},
		{
			name: "an unpaid member cancelling in a forming group frees the slot and lists the group again",
			seed: inGroup(three, members3, member, 7, users3), script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(gmeta.with("returned", 1), 8, fields{"8": 1, "9": 1}), changedTo(member, "cancelled"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}),
				state{act.Forming(): zsetOf(persist, gid, at(10*time.Minute))}),
		},
		{
			name:   "an unpaid member expiring past the group's deadline frees the slot but does not list the group",
			seed:   inGroup(three.with("expires_ms", at(-time.Second)), members3, member.with("pay_by_ms", at(-2*time.Second)), 7, users3),
			script: transitionScript, keys: keys(gid), args: args("expire", 5, "", gid),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(gmeta.with("returned", 1), 8, fields{"8": 1, "9": 1}),
				changedTo(member.with("pay_by_ms", at(-2*time.Second)), "cancelled"),
				groupState(three.with("expires_ms", at(-time.Second), "members", 2), fields{"8": no0, "9": no2})),
		},
		{
			name: "cancel in a sale whose keys expired: the order changes, no meta, stock or users key is created, nothing published",
			seed: orderSeed(pending), script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5)},
			// With no meta to expire it with, the outbox lives as long as the order record.
			after: merge(changedTo(pending, "cancelled"), state{act.Outbox: streamOf(kept, "<entry> o="+no1)}),
		},
		{
			name: "settle in a failed group whose sale's keys expired: cancelled, nothing given back or created",
			seed: join(groupSeed(failed, members), orderSeed(member)), script: transitionScript, keys: keys(gid), args: args("settle", 5, "", gid),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(groupState(failed, members), changedTo(member, "cancelled"),
				state{act.Outbox: streamOf(kept, "<entry> o="+no1)}),
		},
		{
			name: "pay in a loaded sale: the outbox, without a ttl, gets expire_at_ms",
			seed: join(sale(loaded(meta), 8, users), orderSeed(pending)), script: transitionScript, keys: keys(""), args: args("pay", 5, "7", ""),
			want: []any{int64(0), "paid", int64(5)},
			after: merge(saleState(loaded(meta), 8, users), changedTo(pending, "paid"),
				state{act.Outbox: streamOf(saleEndTTL, "<entry> o="+no1)}),
		},
		{
			name:   "cancel in a loaded sale: an outbox with a ttl keeps it",
			seed:   join(sale(loaded(meta), 8, users), orderSeed(pending), [][]any{{"PEXPIRE", act.Outbox, 3_600_000}}),
			script: transitionScript, keys: keys(""), args: args("cancel", 5, "7", ""),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(loaded(meta).with("returned", 1), 9, fields{"8": 1}), changedTo(pending, "cancelled"),
				state{act.Outbox: streamOf("ttl~3600s", "<entry> o="+no1)}),
		},
		{
			name:   "a member leaving a loaded group buy lists the group on a new forming zset, expiring with the outbox at expire_at_ms",
			seed:   join(sale(loaded(gmeta), 7, users3), groupSeed(three, members3), orderSeed(member)),
			script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(loaded(gmeta).with("returned", 1), 8, fields{"8": 1, "9": 1}), changedTo(member, "cancelled"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}), state{
					act.Forming(): zsetOf(saleEndTTL, gid, at(10*time.Minute)),
					act.Outbox:    streamOf(saleEndTTL, "<entry> o="+no1),
				}),
		},
		{
			name: "a member leaving a loaded group buy: a forming zset with a ttl keeps it",
			seed: join(sale(loaded(gmeta), 7, users3), groupSeed(three, members3), orderSeed(member),
				[][]any{{"ZADD", act.Forming(), at(5 * time.Minute), gid2}, {"PEXPIRE", act.Forming(), 3_600_000}}),
			script: transitionScript, keys: keys(gid), args: args("cancel", 5, "7", gid),
			want: []any{int64(0), "cancelled", int64(5)},
			after: merge(saleState(loaded(gmeta).with("returned", 1), 8, fields{"8": 1, "9": 1}), changedTo(member, "cancelled"),
				groupState(three.with("members", 2), fields{"8": no0, "9": no2}), state{
					act.Forming(): zsetOf("ttl~3600s", gid2, at(5*time.Minute), gid, at(10*time.Minute)),
					act.Outbox:    streamOf(saleEndTTL, "<entry> o="+no1),
				}),
		},
	})
}

func TestPersistedScript_table(t *testing.T) {
	keys := []string{act.Outbox, act.Order(no1)}
	o := newOrder(7, 1, 1999, "").with("status", "paid", "fence", 5, "created_ms", at(-time.Minute),
		"pay_by_ms", at(0), "paid_ms", at(-30*time.Second), "outbox", "1-2")
	outbox := [][]any{{"XADD", act.Outbox, "1-1", "o", no0}, {"XADD", act.Outbox, "1-2", "o", no1}}
	runScriptCases(t, []scriptCase{
		{
			name: "the state written is the order's: persisted, off the outbox", seed: join(o.hset(act.Order(no1), retention), outbox),
			script: persistedScript, keys: keys, args: []any{5}, want: []any{int64(1)},
			after: state{
				act.Order(no1): o.with("persisted", 1, "outbox", "").hash(kept),
				act.Outbox:     streamOf(persist, "1-1 o="+no0),
			},
		},
		{
			name: "the order changed since it was read (2): persisted, its entry stays", seed: join(o.hset(act.Order(no1), retention), outbox),
			script: persistedScript, keys: keys, args: []any{4}, want: []any{int64(2)},
			after: state{
				act.Order(no1): o.with("persisted", 1).hash(kept),
				act.Outbox:     streamOf(persist, "1-1 o="+no0, "1-2 o="+no1),
			},
		},
		{
			name: "already off the outbox: deletes no other entry", seed: join(o.with("outbox", "").hset(act.Order(no1), retention), outbox),
			script: persistedScript, keys: keys, args: []any{5}, want: []any{int64(1)},
			after: state{
				act.Order(no1): o.with("persisted", 1, "outbox", "").hash(kept),
				act.Outbox:     streamOf(persist, "1-1 o="+no0, "1-2 o="+no1),
			},
		},
		{
			name:   "a record never changed (no fence field, read as 0): persisted, off the outbox",
			seed:   join(newOrder(7, 1, 1999, "").with("outbox", "1-2").hset(act.Order(no1), retention), outbox),
			script: persistedScript, keys: keys, args: []any{0}, want: []any{int64(1)},
			after: state{
				act.Order(no1): newOrder(7, 1, 1999, "").with("outbox", "", "persisted", 1).hash(kept),
				act.Outbox:     streamOf(persist, "1-1 o="+no0),
			},
		},
		{
			name: "the record is gone (0): nothing created", seed: outbox,
			script: persistedScript, keys: keys, args: []any{5}, want: []any{int64(0)},
			after: state{act.Outbox: streamOf(persist, "1-1 o="+no0, "1-2 o="+no1)},
		},
		{
			name: "a batch: each order as on its own, one XDEL for those written as they are",
			seed: join(o.hset(act.Order(no1), retention), o.with("outbox", "1-1", "fence", 3).hset(act.Order(no0), retention),
				o.with("outbox", "1-3", "fence", 9).hset(act.Order(no2), retention), outbox,
				[][]any{{"XADD", act.Outbox, "1-3", "o", no2}, {"XADD", act.Outbox, "1-4", "o", "other"}}),
			script: persistedScript, keys: []string{act.Outbox, act.Order(no1), act.Order(no0), act.Order(no2), act.Order("1-GONE")},
			args: []any{5, 3, 8, 1}, want: []any{int64(1), int64(1), int64(2), int64(0)},
			after: state{
				act.Order(no1): o.with("persisted", 1, "outbox", "").hash(kept),
				act.Order(no0): o.with("outbox", "", "fence", 3, "persisted", 1).hash(kept),
				act.Order(no2): o.with("outbox", "1-3", "fence", 9, "persisted", 1).hash(kept),
				act.Outbox:     streamOf(persist, "1-3 o="+no2, "1-4 o=other"),
			},
		},
	})
}
