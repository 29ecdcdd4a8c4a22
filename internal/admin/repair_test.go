package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
)

// unreachable is an admin Service on the test's MySQL whose Redis cannot be
// reached: its changes are recorded, and their loads fail.
func (e *env) unreachable(t *testing.T) *admin.Service {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	return admin.New(e.acts, stock.New(rdb, stock.Config{}), nil, nil, admin.Config{})
}

// A close recorded in MySQL whose load into Redis failed left Redis
// selling; Repair (the reconciler's, each pass) loads it, once: orders are
// refused from then on, and a second Repair has nothing to do.
func TestRepair_aCloseThatFailedToReachRedis_isLoaded_once(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.unreachable(t).Close(ctx, e.sale); err == nil {
		t.Fatal("a close with Redis unreachable reported no error")
	}
	e.place(t, 1, 1) // Redis still sells: what Repair must end
	if loaded, err := e.adm.Repair(ctx, e.sale); err != nil || !loaded {
		t.Fatalf("repair: %v, %v; want the close loaded", loaded, err)
	}
	if st := e.shop.RDB.HGet(ctx, rediskeys.For(e.sale).Meta, "status").Val(); st != "closed" {
		t.Fatalf("Redis says %q, want closed", st)
	}
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: e.sale, UserID: 2, Quantity: 1}); !errors.Is(err, activity.ErrEnded) {
		t.Fatalf("an order after the repair: %v, want ErrEnded", err)
	}
	if loaded, err := e.adm.Repair(ctx, e.sale); err != nil || loaded {
		t.Fatalf("second repair: %v, %v; want nothing to do", loaded, err)
	}
	if left, _ := e.shop.Stock.Remaining(ctx, e.sale); left != 9 {
		t.Fatalf("%d left, want 9: the repair changed the stock", left)
	}
}

// An update of a sharded sale whose load failed (a later end) is loaded
// into every shard: each shard's meta carries the rules its orders are
// judged by.
func TestRepair_anUpdateOfAShardedSale_reachesEveryShard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := e.adm.Create(ctx, activity.Activity{Type: activity.Seckill, Name: "sharded", SKU: "SH", PriceCents: 100,
		TotalStock: 30, PerUserLimit: 2, Shards: 3, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.Publish(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	later := a.EndsAt.Add(time.Hour).Truncate(time.Second)
	if u, err := e.unreachable(t).Update(ctx, a.ID, activity.Patch{EndsAt: &later}); err == nil || !u.EndsAt.Equal(later) {
		t.Fatalf("an update with Redis unreachable: %v, ends %v; want recorded and an error", err, u.EndsAt)
	}
	if loaded, err := e.adm.Repair(ctx, a.ID); err != nil || !loaded {
		t.Fatalf("repair: %v, %v; want the update loaded", loaded, err)
	}
	for sh := range 3 {
		if got, _ := e.shop.RDB.HGet(ctx, rediskeys.ForShard(a.ID, sh, 3).Meta, "ends_ms").Int64(); got != later.UnixMilli() {
			t.Fatalf("shard %d ends at %d, want %d", sh, got, later.UnixMilli())
		}
	}
}

// A sale MySQL says is published but Redis does not hold (a publish whose
// load failed, or a Redis that lost it: the two cannot be told apart) is
// not loaded by Repair: loading a lost sale would sell its units again. It
// is the admin's to publish again; the reconciliation reports it.
func TestRepair_aSaleRedisDoesNotHold_isLeftToTheAdmin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := e.adm.Create(ctx, activity.Activity{Type: activity.Seckill, Name: "never loaded", SKU: "N", PriceCents: 100,
		TotalStock: 5, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.unreachable(t).Publish(ctx, a.ID); err == nil {
		t.Fatal("a publish with Redis unreachable reported no error")
	}
	if loaded, err := e.adm.Repair(ctx, a.ID); err != nil || loaded {
		t.Fatalf("repair: %v, %v; want nothing loaded", loaded, err)
	}
	if n := e.shop.RDB.Exists(ctx, rediskeys.For(a.ID).Meta, rediskeys.For(a.ID).Stock).Val(); n != 0 {
		t.Fatalf("Redis holds %d of the sale's keys, want none", n)
	}
	d, err := e.adm.Get(ctx, a.ID)
	if err != nil || d.Reconciliation.State != activity.HasProblems {
		t.Fatalf("get: %+v, %v; want the missing stock reported", d.Reconciliation, err)
	}
}
