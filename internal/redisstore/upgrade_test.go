package redisstore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A sale in progress as the version before 2026-11-24 kept it — each order
// a hash of its own, the outbox a stream, an Idempotency-Key a string, no
// expire_at_ms — is read, changed and persisted as before once Upgrade ran.
func TestUpgrade_movesASaleInProgress_andIsIdempotent(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	k := rediskeys.For(1)
	no, paid := order.NewNo(1), order.NewNo(1)
	seed(t, rdb, now, join(sale(flashMeta().with("accepted", 2), 8, fields{"7": 1, "8": 1}), [][]any{
		{"HSET", k.LegacyOrder(no), "user", 7, "qty", 1, "price", 1999, "status", "pending_payment",
			"created_ms", now - 1000, "pay_by_ms", now + 59_000, "outbox", "1-1", "fence", 0, "persisted", 0, "amount", 1999},
		{"PEXPIRE", k.LegacyOrder(no), 86_400_000},
		{"HSET", k.LegacyOrder(paid), "user", 8, "qty", 1, "price", 1999, "status", "paid", "fence", 41,
			"created_ms", now - 5000, "pay_by_ms", now + 55_000, "paid_ms", now - 2000, "persisted", 1},
		{"XADD", k.Outbox, "1700000000000-0", "o", no},
		{"SET", k.LegacyIdempotencyPrefix() + "7:key-1", no, "PX", 86_400_000},
	}))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	u, err := Upgrade(ctx, rdb, log)
	if err != nil {
		t.Fatal(err)
	}
	if u != (Upgraded{Sales: 1, Orders: 2, Outboxes: 1, Keys: 1}) {
		t.Fatalf("upgraded %+v", u)
	}
	store := New(rdb, Config{})
	t.Cleanup(store.Close)
	o, err := store.Get(ctx, no)
	if err != nil || o.UserID != 7 || o.Status != order.PendingPayment || o.Fence != 0 || o.Persisted || o.AmountCents != 1999 {
		t.Fatalf("order after the upgrade: %+v, %v", o, err)
	}
	if p, err := store.Get(ctx, paid); err != nil || p.Status != order.Paid || p.Fence != 41 || !p.Persisted {
		t.Fatalf("paid order after the upgrade: %+v, %v", p, err)
	}
	entries, err := store.Unpersisted(ctx, 1, 0, 10)
	if err != nil || len(entries) != 1 || entries[0].No != no || entries[0].Since.UnixMilli() != 1700000000000 {
		t.Fatalf("outbox after the upgrade: %+v, %v", entries, err)
	}
	acc, err := store.Accept(ctx, order.NewNo(1), order.PlaceRequest{ActivityID: 1, UserID: 7, Quantity: 1, IdempotencyKey: "key-1"}, order.UserTurn{})
	if err != nil || !acc.Replay || acc.Order.No != no {
		t.Fatalf("the key after the upgrade: %+v, %v; want a replay of %s", acc, err, no)
	}
	for _, key := range []string{k.Meta, k.Stock, k.Users, k.Orders, k.Outbox, k.Idem} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Errorf("%s has ttl %v after the upgrade: every key of a sale must expire", key, ttl)
		}
	}
	if n, _ := rdb.Exists(ctx, k.LegacyOrder(no), k.LegacyOrder(paid), k.LegacyIdempotencyPrefix()+"7:key-1").Result(); n != 0 {
		t.Fatalf("%d old keys left", n)
	}
	if u, err := Upgrade(ctx, rdb, log); err != nil || u != (Upgraded{}) {
		t.Fatalf("a second upgrade: %+v, %v; want nothing to do", u, err)
	}
}

// A sale in shards is in the current form: Upgrade finds nothing to move
// in it, and leaves every key of every shard as it was (a shard's meta
// also matches rediskeys.MetaPattern, and is named by no sale).
func TestUpgrade_leavesAShardedSaleAsItIs(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	keeper := stock.New(rdb, stock.Config{})
	a := activity.Activity{ID: 5, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 9, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute, Shards: 3, Status: activity.Published}
	if _, err := keeper.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	store := New(rdb, Config{Shards: keeper})
	t.Cleanup(store.Close)
	for u := int64(1); u <= 6; u++ {
		if _, err := store.Accept(ctx, order.NewNo(5), order.PlaceRequest{ActivityID: 5, UserID: u, Quantity: 1}, order.UserTurn{}); err != nil {
			t.Fatal(err)
		}
	}
	before := dumpAll(t, rdb)
	u, err := Upgrade(ctx, rdb, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || u != (Upgraded{}) {
		t.Fatalf("upgraded %+v, %v; want nothing", u, err)
	}
	after := dumpAll(t, rdb)
	if len(before) < 15 || len(after) != len(before) {
		t.Fatalf("%d keys before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s changed by the upgrade", k)
		}
	}
}

// dumpAll is every key with its DUMP.
func dumpAll(t *testing.T, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		out[k] = rdb.Dump(ctx, k).Val()
	}
	return out
}

// A sale extended before load.lua re-expired its payments hash (before
// 2026-11-28) holds payment records that would expire before its orders:
// Upgrade gives every key of the sale at least the sale's expiry, and a
// second run finds nothing more to do.
func TestUpgrade_keyExpiringBeforeItsSale_takesTheSalesExpiry(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	keeper := stock.New(rdb, stock.Config{})
	a := activity.Activity{ID: 6, Type: activity.Seckill, Name: "n", SKU: "s", PriceCents: 100, TotalStock: 9, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute, Status: activity.Published}
	if _, err := keeper.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	k := rediskeys.For(6)
	rdb.HSet(ctx, k.Payments, "6-x", "{}")
	rdb.PExpire(ctx, k.Payments, 7*time.Second) // the first expiry of a sale since extended
	if _, err := Upgrade(ctx, rdb, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	want, _ := rdb.HGet(ctx, k.Meta, "expire_at_ms").Int64()
	if got := rdb.PExpireTime(ctx, k.Payments).Val().Milliseconds(); got != want {
		t.Fatalf("the payments hash expires at %d, want the sale's %d", got, want)
	}
	before := dumpAll(t, rdb)
	if u, err := Upgrade(ctx, rdb, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || u != (Upgraded{}) {
		t.Fatalf("a second upgrade: %+v, %v", u, err)
	}
	if after := dumpAll(t, rdb); len(after) != len(before) {
		t.Fatalf("%d keys before the second upgrade, %d after", len(before), len(after))
	}
}
