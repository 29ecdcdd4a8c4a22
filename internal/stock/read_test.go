package stock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// ReadAt counts every order waiting for MySQL, and those waiting past the
// grace, however many (issue 39: the admin view said "1000 orders have
// waited more than 5s" of 13,100, as it counted only the 1,000 it listed);
// it lists the oldest 1,000 and the newest 1,000 within the grace, oldest
// first. Seed → read → compare, a sale of one shard and one of two (whose
// lists are merged: the ends of all shards' entries together).
func TestReadAt_countsEveryWaitingOrder_pastTheListedThousand(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name string
		// entries per shard: how many waited a minute, and how many 2 s
		overdue, recent []int
		listed          int
	}{
		{name: "one shard", overdue: []int{2000}, recent: []int{1200}, listed: 2000},
		{name: "two shards", overdue: []int{1500, 500}, recent: []int{600, 600}, listed: 2000},
		{name: "few enough to list all", overdue: []int{300}, recent: []int{200}, listed: 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			sh := ordertest.New(t)
			ctx := context.Background()
			n := len(c.overdue)
			a := running(1, 100, 5)
			a.Shards = n
			if _, err := sh.Stock.Load(ctx, a); err != nil {
				t.Fatal(err)
			}
			var overdue, all int
			for s := range n {
				var zs []redis.Z
				for i := range c.overdue[s] {
					zs = append(zs, redis.Z{Score: float64(now.Add(-time.Minute).UnixMilli() + int64(i*n+s)), Member: fmt.Sprintf("old-%d-%d", s, i)})
				}
				for i := range c.recent[s] {
					zs = append(zs, redis.Z{Score: float64(now.Add(-2*time.Second).UnixMilli() + int64(i*n+s)), Member: fmt.Sprintf("new-%d-%d", s, i)})
				}
				if err := sh.RDB.ZAdd(ctx, rediskeys.ForShard(1, s, n).Outbox, zs...).Err(); err != nil {
					t.Fatal(err)
				}
				overdue += c.overdue[s]
				all += c.overdue[s] + c.recent[s]
			}

			v, err := sh.Stock.ReadAt(ctx, 1, now)
			if err != nil {
				t.Fatal(err)
			}
			if v.Unrecorded != int64(all) || v.Overdue != int64(overdue) || len(v.UnrecordedOrders) != c.listed {
				t.Fatalf("waiting %d, overdue %d, listed %d; want %d, %d, %d", v.Unrecorded, v.Overdue, len(v.UnrecordedOrders), all, overdue, c.listed)
			}
			us := v.UnrecordedOrders
			for i := 1; i < len(us); i++ {
				if us[i].Since.Before(us[i-1].Since) {
					t.Fatalf("listed out of order at %d: %v after %v", i, us[i].Since, us[i-1].Since)
				}
			}
			if !v.OldestUnrecorded.Equal(us[0].Since) || us[0].No != "old-0-0" {
				t.Fatalf("the oldest listed: %s since %v (oldest %v), want old-0-0", us[0].No, us[0].Since, v.OldestUnrecorded)
			}
			// The newest within the grace end the list, up to the bound.
			within := 0
			for _, u := range us {
				if now.Sub(u.Since) <= activity.PersistenceGrace {
					within++
				}
			}
			recent := all - overdue
			if want := min(recent, 1000); within != want {
				t.Fatalf("%d listed within the grace, want %d", within, want)
			}
		})
	}
}
