// Package ordertest is a fixture for tests of the order path, as httptest
// is for HTTP: a throwaway redis-server with the live stock, the order
// store, the locks and an order Service on it, and sales loaded.
package ordertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Shop is a fresh Redis with the order path's parts on it.
type Shop struct {
	RDB    redis.UniversalClient
	Stock  *stock.Keeper
	Store  *redisstore.Orders
	Locks  *lock.Client
	Limits *redisstore.Limiter
	pipe   *redispipe.Pipe // the locks' and the limiter's
}

// New starts a redis-server for the test and loads sales (Load).
func New(t testing.TB, sales ...activity.Activity) *Shop {
	t.Helper()
	return On(t, testenv.StartRedis(t).Client(t), sales...)
}

// On is New on a Redis the test started itself.
func On(t testing.TB, rdb redis.UniversalClient, sales ...activity.Activity) *Shop {
	t.Helper()
	pipe := redispipe.New(rdb)
	locks := lock.NewClient(rdb, lock.Config{Pipeline: pipe})
	stocks := stock.New(rdb, stock.Config{})
	s := &Shop{RDB: rdb, Stock: stocks, pipe: pipe,
		Store: redisstore.New(rdb, redisstore.Config{Locks: locks, Shards: stocks}), Locks: locks, Limits: redisstore.NewLimiter(rdb, pipe)}
	t.Cleanup(func() { s.Store.Close(); _ = s.Locks.Close(); pipe.Close() })
	for _, a := range sales {
		s.Load(t, a)
	}
	return s
}

// Load publishes a into Redis as on sale now for an hour, payment within a
// minute unless a says otherwise; a names its id, type, stock and limits
// (and group size and time for a group buy), or its items (then its sku,
// price and stock are theirs).
func (s *Shop) Load(t testing.TB, a activity.Activity) {
	t.Helper()
	a.Name, a.SKU, a.PriceCents, a.Status = "n", "s", 100, activity.Published
	if len(a.Items) > 0 { // a sale of items: its figures are theirs
		a.SKU, a.PriceCents, a.TotalStock = "", 0, 0
		a.Normalize()
	}
	a.StartsAt, a.EndsAt = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if a.PaymentTTL == 0 {
		a.PaymentTTL = time.Minute
	}
	if _, err := s.Stock.Load(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// Service is an order Service of the shop queueing on tasks.
func (s *Shop) Service(tasks order.Tasks) *order.Service {
	return order.NewService(s.Deps(tasks), order.Config{})
}

// Deps are the shop's parts as an order Service's collaborators, queueing
// on tasks (nil for tasks.NewDurableService, which gives its own).
func (s *Shop) Deps(tasks order.Tasks) order.Deps {
	return order.Deps{Store: s.Store, Locks: redisstore.Locks{Locker: s.Locks}, Tasks: tasks, SoldOut: s.Stock, Limits: s.Limits, Log: Log()}
}

// Log is a logger that writes nowhere.
func Log() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// NoTasks is an order.Tasks that queues nothing: every task is "lost".
type NoTasks struct{}

func (NoTasks) ExpireThenSync(context.Context, string, time.Time) error { return nil }
func (NoTasks) Sync(context.Context, string, int64) error               { return nil }
func (NoTasks) ExpireAt(context.Context, string, time.Time) error       { return nil }
func (NoTasks) SettleAt(context.Context, string, time.Time) error       { return nil }
func (NoTasks) SyncGroup(context.Context, string) error                 { return nil }

// SetOrder sets fields of order no's record in Redis (name, value, …) as a
// test that breaks or repairs a record by hand needs: the record is one
// field of its sale's orders hash (redisstore's record form).
func SetOrder(t testing.TB, rdb redis.UniversalClient, no string, kv ...any) {
	t.Helper()
	ctx := context.Background()
	act, err := order.ParseNo(no)
	if err != nil {
		t.Fatal(err)
	}
	key := rediskeys.For(act).Orders
	s, err := rdb.HGet(ctx, key, no).Result()
	if err != nil {
		t.Fatalf("order %s: %v", no, err)
	}
	m := redisstore.RecordValues(s)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = fmt.Sprint(kv[i+1])
	}
	if err := rdb.HSet(ctx, key, no, redisstore.FormatRecord(m)).Err(); err != nil {
		t.Fatal(err)
	}
}

// DeleteOrder deletes order no's record from Redis (as when the sale's
// keys, and its records with them, expired).
func DeleteOrder(t testing.TB, rdb redis.UniversalClient, no string) {
	t.Helper()
	act, err := order.ParseNo(no)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(context.Background(), rediskeys.For(act).Orders, no).Err(); err != nil {
		t.Fatal(err)
	}
}
