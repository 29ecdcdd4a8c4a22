package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// shardedSale creates and publishes a flash sale of stock units in shards
// shards, one unit a user.
func (s *stack) shardedSale(stock, shards int) int64 {
	s.t.Helper()
	id, created := s.publishedSale(stock, 1, 600, fmt.Sprintf(`,"shards":%d`, shards))
	if created["shards"] != float64(shards) {
		s.t.Fatalf("a sale created in %d shards answered %v", shards, created)
	}
	return id
}

// One sale in 3 shards on a 3-master Redis Cluster, end to end: its shards
// on three different masters; 150 shoppers, most of them of one shard,
// race for 90 units through the api, and exactly 90 get one, each order
// numbered in its shopper's shard; paid, cancelled and re-sold orders are
// read, paid and cancelled in their shards; the worker writes every order
// to MySQL once, and the invariants hold summed over the shards.
func TestShards_oneSaleOnThreeMasters_endToEnd(t *testing.T) {
	s := newClusterStack(t)
	s.worker()
	ctx := context.Background()
	rc := s.rdb().(*redis.ClusterClient)
	act := s.shardedSale(90, 3)

	masters := map[string]int{}
	for sh := 0; sh < 3; sh++ {
		node, err := rc.MasterForKey(ctx, rediskeys.ForShard(act, sh, 3).Meta)
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr]++
	}
	if len(masters) != 3 {
		t.Fatalf("the 3 shards are on masters %v, want one each", masters)
	}

	var users []int64
	for u := int64(1); len(users) < 150; u++ {
		if activity.ShardOf(u, 3) == 2 || u%4 == 0 {
			users = append(users, u)
		}
	}
	type won struct {
		user int64
		no   string
	}
	var mu sync.Mutex
	var orders []won
	soldOut := 0
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.order(u, act, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.code == 202:
				orders = append(orders, won{u, r.str("order_no")})
			case r.code == 409 && r.errCode() == "SOLD_OUT":
				soldOut++
			default:
				t.Errorf("order: %d %v", r.code, r.body)
			}
		}()
	}
	wg.Wait()
	if len(orders) != 90 || soldOut != 60 {
		t.Fatalf("%d accepted and %d sold out of 150 for 90 units", len(orders), soldOut)
	}
	for _, o := range orders {
		_, shard, shards, err := order.ParseNoShard(o.no)
		if err != nil || shard != activity.ShardOf(o.user, 3) || (shard > 0 && shards != 3) {
			t.Fatalf("user %d's order %s: shard %d of %d (%v), the user's is %d", o.user, o.no, shard, shards, err, activity.ShardOf(o.user, 3))
		}
	}

	// 30 pay, 10 cancel: their units go back to their shards and sell again.
	for i, o := range orders[:40] {
		if i < 30 {
			if r := s.pay(o.user, o.no); r.code != 200 || r.str("status") != "paid" {
				t.Fatalf("pay %s: %d %v", o.no, r.code, r.body)
			}
			continue
		}
		if r := s.call("POST", "/v1/orders/"+o.no+"/cancel", s.bearer(o.user), ""); r.code != 200 {
			t.Fatalf("cancel %s: %d %v", o.no, r.code, r.body)
		}
	}
	if left := s.stockLeft(act); left != 10 {
		t.Fatalf("%d left after 10 cancels, want 10", left)
	}
	resold := 0
	for u := int64(100_000); resold < 10; u++ {
		if r := s.order(u, act, 1); r.code == 202 {
			resold++
		} else if u > 100_200 {
			t.Fatalf("the returned units did not sell again: %d %v", r.code, r.body)
		}
	}
	if r := s.order(200_000, act, 1); r.code != 409 || r.errCode() != "SOLD_OUT" {
		t.Fatalf("an order after the last unit: %d %v", r.code, r.body)
	}
	got := s.call("GET", "/v1/orders/"+orders[0].no, s.bearer(orders[0].user), "")
	if got.code != 200 || got.str("status") != "paid" {
		t.Fatalf("reading a paid order from its shard: %d %v", got.code, got.body)
	}
	detail := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d", act), "")
	byShard, _ := detail.body["stock_by_shard"].([]any)
	if len(byShard) != 3 {
		t.Fatalf("the admin view's stock by shard: %v", detail.body["stock_by_shard"])
	}
	var allotted float64
	for _, x := range byShard {
		allotted += x.(map[string]any)["allotted"].(float64)
	}
	if allotted != 90 {
		t.Fatalf("the shards' allotments sum to %v", allotted)
	}
	s.checkInvariants(act, 100)
	s.waitMySQL(100, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE activity_id = ?", act)
	s.waitMySQL(10, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'cancelled'", act)
}

// The console's live page of a sharded sale shows each shard's stock, and
// follows it as orders take units from one shard.
func TestConsole_livePage_showsStockByShard(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	act := s.shardedSale(30, 3)
	b := newBrowser(t, chromium, s.base)
	b.openLive(act)
	b.waitVisible("#shards")
	if n := b.count("#shards-rows tr"); n != 3 {
		t.Fatalf("%d shard rows, want 3", n)
	}
	b.waitText(`#shards-rows tr[data-shard="1"] .shard-left`, is("10"))
	placed := 0
	for u := int64(1); placed < 4; u++ {
		if activity.ShardOf(u, 3) != 1 {
			continue
		}
		if r := s.order(u, act, 1); r.code != 202 {
			t.Fatalf("order: %d %v", r.code, r.body)
		}
		placed++
	}
	b.waitText(`#shards-rows tr[data-shard="1"] .shard-left`, is("6"))
	b.waitText("#stock-remaining", is("26"))
	if left := b.text(`#shards-rows tr[data-shard="0"] .shard-left`); left != "10" {
		t.Fatalf("shard 0 shows %q left, want 10", left)
	}
}
