package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The scripts' argument handling, against a real redis-server: whatever
// quantities, users, Idempotency-Keys, order numbers, group ids (and so
// group key names), actions and fences reach them — the Go side validates
// first; the scripts must not rely on it — a script never fails with a Lua
// error, and nothing the sale must hold breaks: units left plus units held
// is the total, nobody holds more than the limit or less than nothing, each
// user's units are their live orders', every acceptance is one well-formed
// order record, every unit comes back exactly once, and a group never has
// more members than places, counts each payment once and, settled at its
// deadline as the worker settles it, refunds every paid member of a group
// that failed (invariants.SettledRedis, and the checks below).
//
// One run: a flash sale's two orders (accepted one by one or as one batch)
// or a group buy's group opened and joined; action then action2 on the
// first and second order, each with fence and fence+1; both marked
// persisted; for a group buy, its deadline brought forward and the group
// settled, its members refunded or cancelled. which's bits choose: 0 a
// group buy; 1 the second order drawn the first's number; 2 by the same
// user; 3 a flash sale's orders in one batch; 4 the changes asked by the
// system, not the user; 5 groups of 3, not 2; 6 no deadline; 7 a sale of
// two items (A, 6 units, and B, 4 units and a limit of 2 of its own),
// the first order of A, the second of B (a group's joiner gets A), whose
// books item by item must hold too.
func FuzzScripts(f *testing.F) {
	rdb := testenv.StartRedis(f).Client(f)
	ctx := context.Background()
	const total, limit = 10, 3
	no, gid := "1-06H0R9931VTWXNRJT6WDE2M3AR", "1-06H0R99330PEGES65JT342WZ7G"
	f.Add(int64(1), int64(7), "key", "pay", "pay", int64(5), uint8(0), no, gid)
	f.Add(int64(-5), int64(7), "", "cancel", "expire", int64(1), uint8(1), no, gid)
	f.Add(int64(0), int64(-1), "", "refund", "settle", int64(0), uint8(2), "", "")
	f.Add(int64(3), int64(7), "k", "bogus", "pay", int64(-1), uint8(3), "x", "y")
	f.Add(int64(1<<62), int64(0), "", "expire", "cancel", int64(1<<62), uint8(4), no, no)
	f.Add(int64(2), int64(9), "", "settle", "refund", int64(9), uint8(5), "1-a|b", "1-c|d")
	f.Add(int64(1), int64(9), "k", "pay", "pay", int64(9), uint8(1|32), no, gid)
	f.Add(int64(1), int64(9), "k", "pay", "cancel", int64(9), uint8(1|16|64), no, "g*[x]")
	f.Add(int64(2), int64(9), "", "cancel", "pay", int64(3), uint8(128|8), no, gid)
	f.Add(int64(3), int64(9), "k", "expire", "cancel", int64(3), uint8(128|4), no, gid)
	f.Add(int64(1), int64(9), "", "pay", "pay", int64(3), uint8(128|1), no, gid)
	f.Fuzz(func(t *testing.T, qty, user int64, idem, action, action2 string, fence int64, which uint8, no, gid string) {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		group := which&1 != 0
		a := activity.Activity{ID: 1, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: total,
			PerUserLimit: limit, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
			PaymentTTL: time.Minute, Status: activity.Published}
		if group {
			a.Type, a.GroupSize, a.GroupTTL = activity.GroupBuy, 2+int(which>>5&1), time.Minute
		}
		itemA, itemB := "", ""
		if which&128 != 0 {
			a.SKU, a.PriceCents, a.TotalStock = "", 0, 0
			a.Items = []activity.Item{{SKU: "A", PriceCents: 100, Stock: 6}, {SKU: "B", PriceCents: 70, Stock: 4, PerUserLimit: 2}}
			a.Normalize()
			itemA, itemB = "A", "B"
		}
		if _, err := stock.New(rdb, stock.Config{}).Load(ctx, a); err != nil {
			t.Fatal(err)
		}
		k := rediskeys.For(1)
		in := fmt.Sprintf("(qty %d, user %d, idem %q, actions %q %q, fence %d, which %#x, no %q, gid %q)",
			qty, user, idem, action, action2, fence, which, no, gid)
		check := func(what string, err error) {
			t.Helper()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatalf("%s: a Lua error: %v %s", what, err, in)
			}
		}
		run := func(what string, s *redis.Script, keys []string, args ...any) []any {
			t.Helper()
			res, err := s.Run(ctx, rdb, keys, args...).Slice()
			check(what, err)
			return res
		}

		// The two orders.
		no2, user2 := order.NewNo(1), user+1
		if which&2 != 0 {
			no2 = no
		}
		if which&4 != 0 {
			user2 = user
		}
		field := ""
		if idem != "" {
			field = rediskeys.IdempotencyField(user, idem)
		}
		switch {
		case group:
			openField, joinField := "", ""
			if idem != "" {
				openField, joinField = rediskeys.OpenIdempotencyField(user, idem), rediskeys.JoinIdempotencyField(gid, user2, idem)
			}
			run("open", redisstore.OpenGroupScript, redisstore.GroupKeys(k, gid), user, qty, no, gid, openField, itemA)
			run("join", redisstore.JoinGroupScript, redisstore.GroupKeys(k, gid), user2, 1, no2, gid, joinField)
		case which&8 != 0: // one batch, as concurrent requests are
			keys := []string{k.Meta, k.Stock, k.Users, k.Orders, k.Idem, k.Outbox, k.Items, k.ItemUsers}
			for i, c := range redisstore.AcceptMerged.RunAll(ctx, rdb, []luascript.Call{
				{Keys: keys, Args: []any{user, qty, no, field, itemA}}, {Keys: keys, Args: []any{user2, 1, no2, "", itemB}}}) {
				check(fmt.Sprintf("accept %d of a batch", i+1), c.Err())
			}
		default:
			keys := []string{k.Meta, k.Stock, k.Users, k.Orders, k.Idem, k.Outbox, k.Items, k.ItemUsers}
			check("accept", redisstore.AcceptMerged.Run(ctx, rdb, keys, user, qty, no, field, itemA).Err())
			check("accept 2", redisstore.AcceptMerged.Run(ctx, rdb, keys, user2, 1, no2, "", itemB).Err())
		}

		// Changes, as the user (or the system) asks them, on both orders.
		g := ""
		if group {
			g = gid
		}
		for _, c := range []struct {
			no, action string
			user       int64
		}{{no, action, user}, {no2, action2, user2}} {
			asking := strconv.FormatInt(c.user, 10)
			if which&16 != 0 {
				asking = ""
			}
			for _, f := range []int64{fence, fence + 1} {
				run(c.action, redisstore.TransitionScript, transitionKeys(k, g), c.action, f, k.Restock, asking, g, c.no)
			}
		}
		run("persisted", redisstore.PersistedScript, []string{k.Orders, k.Outbox}, no, fence, no2, fence)

		// The group's deadline, and its settlement as the worker's
		// (order.Service.Settle): a failed group's paid members refunded,
		// the others cancelled, each with a fence above its record's and
		// the group its record names. Not when a fence is past 2^52: Lua's
		// numbers (doubles) cannot tell such a fence from the next, and the
		// lock's counters never come near.
		if group && which&64 == 0 && fencesBelow(t, rdb, k, 1<<52, no, no2) && rdb.Exists(ctx, k.Group(gid)).Val() == 1 {
			if err := rdb.HSet(ctx, k.Group(gid), "expires_ms", time.Now().Add(-time.Second).UnixMilli()).Err(); err != nil {
				t.Fatal(err)
			}
			res := run("settle", redisstore.SettleScript, []string{k.Meta, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Unsettled()}, gid)
			if len(res) < 2 || (res[0] != "failed" && res[0] != "succeeded") {
				t.Fatalf("settled past its deadline: %v %s", res, in)
			}
			for _, m := range res[2:] {
				mno, _ := m.(string)
				rec := redisstore.RecordValues(rdb.HGet(ctx, k.Orders, mno).Val())
				f, _ := strconv.ParseInt(rec["fence"], 10, 64)
				for _, act := range []string{"refund", "settle"} {
					run(act, redisstore.TransitionScript, transitionKeys(k, rec["group"]), act, f+1, k.Restock, "", rec["group"], mno)
				}
			}
		}

		checkBooks(t, rdb, k, total, limit, in)
		if which&128 != 0 {
			checkItemBooks(t, rdb, k, a.Items, in)
		}
		rep, err := invariants.SettledRedis(ctx, rdb, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Fatalf("%s\n%s", rep, in)
		}
	})
}

// transitionKeys are transition.lua's keys for an order of group gid ("":
// a flash sale's order).
func transitionKeys(k rediskeys.Activity, gid string) []string {
	if gid == "" {
		gid = "-" // unused by the script; a key name all the same
	}
	return []string{k.Meta, k.Stock, k.Users, k.Orders, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Outbox, k.Items, k.ItemUsers}
}

// fencesBelow tells whether each of the orders nos that has a record has
// a fence below max.
func fencesBelow(t *testing.T, rdb redis.UniversalClient, k rediskeys.Activity, max int64, nos ...string) bool {
	t.Helper()
	for _, no := range nos {
		s, err := rdb.HGet(context.Background(), k.Orders, no).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f, err := strconv.ParseInt(redisstore.RecordValues(s)["fence"], 10, 64); err == nil && f >= max {
			return false
		}
	}
	return true
}

// checkBooks checks the sale's books: units left plus units held is the
// total; each holder holds from 1 to limit units, and exactly the units of
// their live orders; a group's count of members is its member list's.
func checkBooks(t *testing.T, rdb redis.UniversalClient, k rediskeys.Activity, total, limit int64, in string) {
	t.Helper()
	ctx := context.Background()
	left, _ := rdb.Get(ctx, k.Stock).Int64()
	held, users := int64(0), rdb.HGetAll(ctx, k.Users).Val()
	for u, v := range users {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > limit {
			t.Fatalf("user %s holds %q units (limit %d) %s", u, v, limit, in)
		}
		held += n
	}
	if left < 0 || left+held != total {
		t.Fatalf("%d left + %d held != %d total %s", left, held, total, in)
	}
	live := map[string]int64{}
	for no, s := range rdb.HGetAll(ctx, k.Orders).Val() {
		r := redisstore.RecordValues(s)
		if st := r["status"]; st == string(order.PendingPayment) || st == string(order.Paid) {
			q, err := strconv.ParseInt(r["qty"], 10, 64)
			if err != nil {
				t.Fatalf("order %q: record %q %s", no, s, in)
			}
			live[r["user"]] += q
		}
	}
	for u, q := range live {
		if users[u] != strconv.FormatInt(q, 10) {
			t.Fatalf("user %s holds %q units, their live orders %d %s", u, users[u], q, in)
		}
	}
	if len(live) != len(users) {
		t.Fatalf("%d users hold units, %d have live orders %s", len(users), len(live), in)
	}
	iter := rdb.Scan(ctx, 0, k.Group("")+"*", 100).Iterator()
	for iter.Next(ctx) {
		gid := iter.Val()[len(k.Group("")):]
		members, _ := rdb.HGet(ctx, k.Group(gid), "members").Int64()
		if n := rdb.HLen(ctx, k.GroupMembers(gid)).Val(); n != members {
			t.Fatalf("group %q counts %d members, lists %d %s", gid, members, n, in)
		}
	}
}

// checkItemBooks checks a sale of several items' books item by item: each
// item's units left plus those its live orders hold is its total, none
// below zero; of an item with a limit of its own (the only ones whose
// holders are counted), a holder holds from 1 to that limit, exactly the
// units of their live orders of it.
func checkItemBooks(t *testing.T, rdb redis.UniversalClient, k rediskeys.Activity, items []activity.Item, in string) {
	t.Helper()
	ctx := context.Background()
	h := rdb.HGetAll(ctx, k.Items).Val()
	iheld := rdb.HGetAll(ctx, k.ItemUsers).Val()
	live := map[string]int64{} // "<user>:<sku>" -> units of live orders
	for no, s := range rdb.HGetAll(ctx, k.Orders).Val() {
		r := redisstore.RecordValues(s)
		if st := r["status"]; st == string(order.PendingPayment) || st == string(order.Paid) {
			q, _ := strconv.ParseInt(r["qty"], 10, 64)
			if r["item"] == "" {
				t.Fatalf("order %q of a sale of items names none: %q %s", no, s, in)
			}
			live[r["user"]+":"+r["item"]] += q
		}
	}
	limits := map[string]int{}
	for _, it := range items {
		limits[it.SKU] = it.PerUserLimit
		left, _ := strconv.ParseInt(h["left:"+it.SKU], 10, 64)
		total, _ := strconv.ParseInt(h["total:"+it.SKU], 10, 64)
		held := int64(0)
		for f, q := range live {
			if _, sku, _ := strings.Cut(f, ":"); sku == it.SKU {
				held += q
			}
		}
		for f, v := range iheld {
			if _, sku, _ := strings.Cut(f, ":"); sku == it.SKU {
				n, _ := strconv.ParseInt(v, 10, 64)
				if it.PerUserLimit == 0 || n <= 0 || n > int64(it.PerUserLimit) {
					t.Fatalf("%s holds %d of item %s (its limit %d) %s", f, n, it.SKU, it.PerUserLimit, in)
				}
			}
		}
		if left < 0 || total != int64(it.Stock) || left+held != total {
			t.Fatalf("item %s: %d left + %d held, total %d of %d %s", it.SKU, left, held, total, it.Stock, in)
		}
	}
	for f, q := range live {
		if _, sku, _ := strings.Cut(f, ":"); limits[sku] > 0 && iheld[f] != strconv.FormatInt(q, 10) {
			t.Fatalf("%s's live orders hold %d, itemusers says %q %s", f, q, iheld[f], in)
		}
	}
}
