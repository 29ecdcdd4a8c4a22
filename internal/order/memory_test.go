package order_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What a launch's shopper costs Redis (issue 43, item 2): every shopper
// new, one unit each, placed through the order service as the api places
// them. Each key's MEMORY USAGE (every element counted) and used_memory,
// before and after, per order; the keys there are before and after (a
// shopper must add fields, never keys). `go test -race -count=1 -run
// TestRedisMemory_freshShoppers -v ./internal/order/`; the figures in
// docs/benchmarks.md ("What a fresh shopper costs Redis").
func TestRedisMemory_freshShoppers_fieldsNotKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("fifty thousand orders")
	}
	const n = 50_000
	sale := activity.Activity{ID: 43, Type: activity.Seckill, TotalStock: 2 * n, PerUserLimit: 1}
	sh := ordertest.New(t, sale)
	svc := sh.Service(ordertest.NoTasks{})
	ctx := context.Background()
	rdb := sh.RDB.(*redis.Client)
	// A first order makes the sale's keys of orders (their hashes and sets
	// exist from then on): the measure is of what each next shopper adds.
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: sale.ID, UserID: 9_999_999, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	before, used0 := keyUsage(t, rdb), testenv.UsedMemory(t, rdb)
	var failed atomic.Int64
	var wg sync.WaitGroup
	const conc = 256
	for g := range conc {
		wg.Go(func() {
			for i := g; i < n; i += conc {
				// 8-digit ids, as a large shop's.
				if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: sale.ID, UserID: int64(10_000_000 + i), Quantity: 1}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d orders failed", f, n)
	}
	after, used1 := keyUsage(t, rdb), testenv.UsedMemory(t, rdb)
	var rows []string
	total := 0.0
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range after {
			if !yield(k) {
				return
			}
		}
	}) {
		per := float64(after[k]-before[k]) / n
		total += per
		rows = append(rows, fmt.Sprintf("| `%s` | %d | %d | %.1f |", k, before[k], after[k], per))
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("key %s went away", k)
		}
	}
	perUsed := float64(used1-used0) / n
	t.Logf("%d fresh shoppers' orders, one unit each:\n| key | bytes before | after | per order |\n|---|---:|---:|---:|\n%s\n"+
		"keys: %d before, %d after; MEMORY USAGE per order %.1f bytes; used_memory per order %.1f bytes",
		n, strings.Join(rows, "\n"), len(before), len(after), total, perUsed)
	if len(after) != len(before) {
		t.Errorf("%d keys before the shoppers, %d after: a shopper added keys, not fields", len(before), len(after))
	}
	// Measured 2026-11-29 (docs/benchmarks.md): see there; the band guards
	// against a field or key per shopper creeping in.
	if perUsed < 100 || perUsed > 400 || total < 100 || total > 400 {
		t.Errorf("%.1f bytes (used_memory) and %.1f (MEMORY USAGE) a fresh shopper's order: outside 100-400", perUsed, total)
	}
}

// keyUsage is every key's MEMORY USAGE, all its elements counted.
func keyUsage(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[iter.Val()] = n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
