package stock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func running(id int64, total, limit int) activity.Activity {
	return activity.Activity{
		ID: id, Type: activity.Seckill, Name: "sale", SKU: "S", PriceCents: 100, TotalStock: total,
		PerUserLimit: limit, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTTL: time.Minute, Status: activity.Published,
	}
}

// Every key Load writes expires with the sale (activity.LiveUntil);
// loading again refreshes the rules and never resets the stock or the
// counters; closing refuses orders; a draft is not loaded.
func TestLoad_again_neverResetsStock_closeRefuses(t *testing.T) {
	sh := ordertest.New(t)
	ctx, s := context.Background(), sh.Stock
	a := running(1, 10, 5)
	if left, err := s.Load(ctx, a); err != nil || left != 10 {
		t.Fatalf("load: %d, %v", left, err)
	}
	k := rediskeys.For(1)
	want := a.LiveUntil(activity.DefaultRetention)
	for _, key := range []string{k.Meta, k.Stock} {
		if at := sh.RDB.PExpireTime(ctx, key).Val(); (at - time.Duration(want.UnixMilli())*time.Millisecond).Abs() > time.Second {
			t.Errorf("%s expires at %v, want %v", key, time.UnixMilli(at.Milliseconds()), want)
		}
	}
	svc := sh.Service(ordertest.NoTasks{})
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 1, UserID: 7, Quantity: 4}); err != nil {
		t.Fatal(err)
	}
	a.EndsAt = a.EndsAt.Add(time.Hour)
	a.Version++ // each admin change has its own version (load.lua ignores an old one)
	if left, err := s.Load(ctx, a); err != nil || left != 6 {
		t.Fatalf("reload: %d, %v; want 6 left", left, err)
	}
	if v, _ := s.Read(ctx, 1); v.Accepted != 1 || v.Remaining != 6 || v.Total != 10 || v.Status != activity.Published {
		t.Fatalf("after a reload: %+v", v)
	}
	a.Status, a.Version = activity.Closed, a.Version+1
	if _, err := s.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 1, UserID: 8, Quantity: 1}); !errors.Is(err, activity.ErrEnded) {
		t.Fatalf("an order after close: %v", err)
	}
	draft := running(2, 10, 1)
	draft.Status = activity.Draft
	if _, err := s.Load(ctx, draft); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("loading a draft: %v", err)
	}
	if n := sh.RDB.Exists(ctx, rediskeys.For(2).Meta, rediskeys.For(2).Stock).Val(); n != 0 {
		t.Fatalf("a refused load wrote %d keys", n)
	}
}

// Units given back after a sale sold out reopen it: in every process,
// through the restock notice the giving back publishes.
func TestSoldOut_flagClearsWhenStockComesBack(t *testing.T) {
	soldOutFlagClears(t, testenv.StartRedis(t).Client(t), 1)
}

// On a 3-master Redis Cluster the restock notice (PUBLISH, which a cluster
// broadcasts to every node) reaches a watcher whose pattern subscription sits
// on whichever master: sales on every master are tried.
func TestSoldOut_flagClearsWhenStockComesBack_onACluster(t *testing.T) {
	rc := testenv.StartRedisCluster(t, 3).Client(t)
	masters := map[string]bool{}
	for id := int64(1); len(masters) < 3; id++ {
		node, err := rc.MasterForKey(context.Background(), rediskeys.For(id).Meta)
		if err != nil {
			t.Fatal(err)
		}
		if addr := node.Options().Addr; !masters[addr] {
			masters[addr] = true
			soldOutFlagClears(t, rc, id)
		}
	}
}

// soldOutFlagClears sells out a 2-unit sale through the order path, sees
// both processes refuse locally, cancels an order, and sees the other
// process hear of it and sell the unit.
func soldOutFlagClears(t *testing.T, rdb redis.UniversalClient, id int64) {
	t.Helper()
	here := ordertest.On(t, rdb, running(id, 2, 1))
	there := ordertest.On(t, rdb)                                     // another process
	there.Stock = stock.New(rdb, stock.Config{SoldOutTTL: time.Hour}) // no expiry to lean on
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go there.Stock.WatchRestock(ctx, nil)
	hereSvc, thereSvc := here.Service(ordertest.NoTasks{}), there.Service(ordertest.NoTasks{})
	first, err := hereSvc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := thereSvc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 2, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []*order.Service{hereSvc, thereSvc} {
		if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 3, Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) {
			t.Fatalf("after selling out: %v", err)
		}
	}
	if !here.Stock.SoldOut(id) || !there.Stock.SoldOut(id) {
		t.Fatal("sold-out flag not set")
	}
	time.Sleep(50 * time.Millisecond) // the watcher's subscription is up
	if _, err := hereSvc.Cancel(ctx, first.No, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for there.Stock.SoldOut(id) {
		if time.Now().After(deadline) {
			t.Fatalf("activity %d: the other process never heard the restock notice", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := thereSvc.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 3, Quantity: 1}); err != nil {
		t.Fatalf("buying the returned unit: %v", err)
	}
}
