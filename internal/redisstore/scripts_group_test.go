package redisstore

import (
	"testing"
	"time"
)

// enterKeys are open_group's and join_group's keys for order no1 in gid.
var enterKeys = groupKeys(act, gid, no1)

func enterArgs(user int) []any { return []any{user, 1, no1, gid, retention} }

func TestOpenGroupScript_table(t *testing.T) {
	runScriptCases(t, []scriptCase{
		{
			name: "open: the order, the group with its first member, listed as forming and unsettled",
			seed: sale(groupMeta(), 10, nil), script: openGroupScript, keys: enterKeys, args: enterArgs(7),
			want: []any{int64(0), int64(9), "now+600s", "now+60s", int64(999)},
			after: merge(saleState(groupMeta().with("accepted", 1, "groups_opened", 1), 9, nil), state{
				act.Users:             fields{"7": 1}.hash(persist), // created here: load.lua could not expire it
				act.Order(no1):        newOrder(7, 1, 999, gid).hash(kept),
				act.Outbox:            streamOf(persist, "<entry> o="+no1),
				act.Group(gid):        fields{"status": "forming", "size": 2, "members": 1, "paid": 0, "leader": 7, "expires_ms": at(10 * time.Minute), "created_ms": at(0)}.hash(kept),
				act.Forming():         zsetOf(persist, gid, at(10*time.Minute)),
				act.Unsettled():       zsetOf(persist, gid, at(10*time.Minute)),
				act.GroupMembers(gid): fields{"7": no1}.hash(kept),
			}),
		},
		{
			name: "open on a flash sale (8)", seed: sale(flashMeta(), 10, nil),
			script: openGroupScript, keys: enterKeys, args: enterArgs(7),
			want: []any{int64(8), int64(10), int64(0), int64(0), int64(0)}, after: saleState(flashMeta(), 10, nil),
		},
		{
			name: "open when sold out (5)", seed: sale(groupMeta(), 0, fields{"8": 2}),
			script: openGroupScript, keys: enterKeys, args: enterArgs(7),
			want: []any{int64(5), int64(0), int64(0), int64(0), int64(0)}, after: saleState(groupMeta(), 0, fields{"8": 2}),
		},
	})
}

func TestJoinGroupScript_table(t *testing.T) {
	// User 8 opened gid (of size 3 unless said) a minute ago.
	meta := groupMeta().with("accepted", 1, "groups_opened", 1)
	forming := group("forming", 3, 1, 0, at(10*time.Minute)).with("leader", 8)
	leader := fields{"8": no0}
	listed := zsetOf(persist, gid, at(10*time.Minute))
	opened := func(g fields, ms fields) [][]any {
		return join(sale(meta, 9, fields{"8": 1}), groupSeed(g, ms),
			[][]any{{"ZADD", act.Forming(), at(10 * time.Minute), gid}, {"ZADD", act.Unsettled(), at(10 * time.Minute), gid}})
	}
	openedState := func(g fields, ms fields) state {
		return merge(saleState(meta, 9, fields{"8": 1}), groupState(g, ms), state{act.Forming(): listed, act.Unsettled(): listed})
	}
	joined := func(g fields) state {
		return merge(saleState(meta.with("accepted", 2), 8, fields{"7": 1, "8": 1}),
			groupState(g, fields{"8": no0, "7": no1}), state{
				act.Order(no1):  newOrder(7, 1, 999, gid).hash(kept),
				act.Outbox:      streamOf(persist, "<entry> o="+no1),
				act.Unsettled(): listed,
			})
	}
	refused := func(code int64, expires any) []any { return []any{code, int64(0), expires, int64(0), int64(0)} }

	runScriptCases(t, []scriptCase{
		{
			name: "join: the order, a member more, still forming and listed", seed: opened(forming, leader),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want:  []any{int64(0), int64(8), "now+600s", "now+60s", int64(999)},
			after: merge(joined(forming.with("members", 2)), state{act.Forming(): listed}),
		},
		{
			name: "the join that fills the group takes it off the forming zset", seed: opened(forming.with("size", 2), leader),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want:  []any{int64(0), int64(8), "now+600s", "now+60s", int64(999)},
			after: joined(forming.with("size", 2, "members", 2)),
		},
		{
			name: "no such group (9)", seed: sale(meta, 9, fields{"8": 1}),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want: refused(9, int64(0)), after: saleState(meta, 9, fields{"8": 1}),
		},
		{
			name: "a succeeded group is closed (10)", seed: opened(forming.with("status", "succeeded"), leader),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want: refused(10, "now+600s"), after: openedState(forming.with("status", "succeeded"), leader),
		},
		{
			name: "a forming group past its deadline is closed (10)", seed: opened(forming.with("expires_ms", at(-time.Second)), leader),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want: refused(10, "now-1s"), after: openedState(forming.with("expires_ms", at(-time.Second)), leader),
		},
		{
			name: "already a member (11)", seed: opened(forming, leader),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(8),
			want: refused(11, "now+600s"), after: openedState(forming, leader),
		},
		{
			name: "full (12)", seed: opened(forming.with("members", 3), fields{"8": no0, "9": no2, "6": "1-DDDDDDDDDDDDDDDD"}),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want:  refused(12, "now+600s"),
			after: openedState(forming.with("members", 3), fields{"8": no0, "9": no2, "6": "1-DDDDDDDDDDDDDDDD"}),
		},
		{
			name: "the sale's rules still apply (3: closed)", seed: join(opened(forming, leader), meta.with("status", "closed").hset(act.Meta, 0)),
			script: joinGroupScript, keys: enterKeys, args: enterArgs(7),
			want:  []any{int64(3), int64(9), "now+600s", int64(0), int64(0)},
			after: merge(openedState(forming, leader), state{act.Meta: meta.with("status", "closed").hash(saleTTL)}),
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
