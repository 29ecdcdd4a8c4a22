package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The scripts' argument handling, against a real redis-server: whatever
// quantities, users, keys, actions and fences reach them (the Go side
// validates first; the scripts must not rely on it), a script never fails
// with a Lua error, and the sale's books always balance: units left plus
// units held is the total, nobody holds more than the limit or less than
// nothing, and every order is in a known state.
func FuzzScripts(f *testing.F) {
	rdb := testenv.StartRedis(f).Client(f)
	ctx := context.Background()
	const total, limit = 10, 3
	f.Add(int64(1), int64(7), "key", "pay", int64(5), uint8(0))
	f.Add(int64(-5), int64(7), "", "cancel", int64(1), uint8(1))
	f.Add(int64(0), int64(-1), "", "refund", int64(0), uint8(2))
	f.Add(int64(3), int64(7), "k", "bogus", int64(-1), uint8(3))
	f.Add(int64(1<<62), int64(0), "", "expire", int64(1<<62), uint8(4))
	f.Add(int64(2), int64(9), "", "settle", int64(9), uint8(5))
	f.Fuzz(func(t *testing.T, qty, user int64, idem, action string, fence int64, which uint8) {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		a := activity.Activity{ID: 1, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: total,
			PerUserLimit: limit, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
			PaymentTTL: time.Minute, Status: activity.Published}
		if which%2 == 1 {
			a.Type, a.GroupSize, a.GroupTTL = activity.GroupBuy, 2, time.Minute
		}
		if _, err := stock.New(rdb, stock.Config{}).Load(ctx, a); err != nil {
			t.Fatal(err)
		}
		k := rediskeys.For(1)
		no, gid := order.NewNo(1), order.NewNo(1)
		field, openField := "", ""
		if idem != "" {
			field, openField = rediskeys.IdempotencyField(user, idem), rediskeys.GroupIdempotencyField("open", user, idem)
		}
		check := func(err error) {
			t.Helper()
			if err != nil && err != redis.Nil {
				t.Fatalf("a Lua error: %v (qty %d, user %d, idem %q, action %q, fence %d)", err, qty, user, idem, action, fence)
			}
		}
		run := func(s *redis.Script, keys []string, args ...any) {
			t.Helper()
			check(s.Run(ctx, rdb, keys, args...).Err())
		}
		// Two orders, so that a change meets a sale with something sold.
		for i, q := range []int64{qty, 1} {
			n := no
			if i == 1 {
				n = order.NewNo(1)
			}
			switch {
			case which%2 == 0:
				check(acceptMerged.Run(ctx, rdb, []string{k.Meta, k.Stock, k.Users, k.Orders, k.Idem, k.Outbox},
					user, q, n, field).Err())
			case i == 0:
				run(openGroupScript, groupKeys(k, gid), user, q, n, gid, openField)
			default:
				run(joinGroupScript, groupKeys(k, gid), user+1, q, n, gid, "")
			}
		}
		g := "-"
		if which%2 == 1 {
			g = gid
		}
		gArg := g
		if g == "-" {
			gArg = ""
		}
		for _, f := range []int64{fence, fence + 1} {
			run(transitionScript, []string{k.Meta, k.Stock, k.Users, k.Orders, k.Group(g), k.GroupMembers(g), k.Forming(), k.Outbox},
				action, f, k.Restock, strconv.FormatInt(user, 10), gArg, no)
		}
		run(persistedScript, []string{k.Orders, k.Outbox}, no, fence)
		if which%2 == 1 {
			run(settleScript, []string{k.Meta, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Unsettled()}, gid)
		}

		left, _ := rdb.Get(ctx, k.Stock).Int64()
		held := int64(0)
		for u, v := range rdb.HGetAll(ctx, k.Users).Val() {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > limit {
				t.Fatalf("user %s holds %q units (limit %d)", u, v, limit)
			}
			held += n
		}
		if left < 0 || left+held != total {
			t.Fatalf("%d left + %d held != %d total (qty %d, user %d, action %q, fence %d)", left, held, total, qty, user, action, fence)
		}
		switch st := RecordStatus(rdb.HGet(ctx, k.Orders, no).Val()); st {
		case "", "pending_payment", "paid", "cancelled", "refunded":
		default:
			t.Fatalf("order status %q", st)
		}
	})
}
