package ordertest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// UsersIn returns n user ids, from 1 on, whose shard of a sale of shards
// shards pick accepts.
func UsersIn(n, shards int, pick func(shard int) bool) []int64 {
	var out []int64
	for u := int64(1); len(out) < n; u++ {
		if pick(activity.ShardOf(u, shards)) {
			out = append(out, u)
		}
	}
	return out
}

// PlaceAll places one order of one unit for each of users, all at once,
// and counts the answers: "ok", "sold out", or the error.
func PlaceAll(t testing.TB, svc *order.Service, act int64, users []int64) map[string]int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	start := make(chan struct{})
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := svc.Place(context.Background(), order.PlaceRequest{ActivityID: act, UserID: u, Quantity: 1})
			key := "ok"
			switch {
			case errors.Is(err, activity.ErrSoldOut):
				key = "sold out"
			case err != nil:
				key = err.Error()
			}
			mu.Lock()
			answers[key]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return answers
}

// CheckShards checks what sale act of shards shards and total units
// holds in Redis after its orders: every unit sold or left, nothing in
// transit, each shard's allotment its sales and what it holds, no user
// over limit, and sold units as many as the orders holding units hold.
func CheckShards(t testing.TB, rdb redis.UniversalClient, act int64, shards int, total, limit int64) (sold int64) {
	t.Helper()
	ctx := context.Background()
	var allot, left int64
	for sh := 0; sh < shards; sh++ {
		k := rediskeys.ForShard(act, sh, shards)
		l, _ := rdb.Get(ctx, k.Stock).Int64()
		tot, _ := rdb.HGet(ctx, k.Meta, "total").Int64()
		if l < 0 {
			t.Fatalf("shard %d has %d units left", sh, l)
		}
		if n := rdb.HLen(ctx, k.Transit).Val(); n != 0 {
			t.Fatalf("shard %d has %d transfers not finished", sh, n)
		}
		var held int64
		for u, v := range rdb.HGetAll(ctx, k.Users).Val() {
			n, _ := strconv.ParseInt(v, 10, 64)
			uid, _ := strconv.ParseInt(u, 10, 64)
			if n > limit {
				t.Fatalf("user %s holds %d units, over the limit %d", u, n, limit)
			}
			if activity.ShardOf(uid, shards) != sh {
				t.Fatalf("user %s holds units in shard %d, not theirs (%d)", u, sh, activity.ShardOf(uid, shards))
			}
			held += n
		}
		var records int64 // units of the orders holding them
		for no, rec := range rdb.HGetAll(ctx, k.Orders).Val() {
			o, err := redisstore.ParseRecord(no, rec)
			if err != nil {
				t.Fatal(err)
			}
			if o.Status == order.PendingPayment || o.Status == order.Paid {
				records += int64(o.Quantity)
			}
		}
		if held != tot-l || records != held {
			t.Fatalf("shard %d: allotment %d, left %d, users hold %d, orders hold %d", sh, tot, l, held, records)
		}
		allot += tot
		left += l
	}
	if allot != total {
		t.Fatalf("the shards' allotments sum to %d, the sale has %d", allot, total)
	}
	return total - left
}
