package order_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// One user's 20 concurrent orders under a limit of 3: exactly 3 accepted,
// the rest LIMIT_EXCEEDED; and the per-user lock leaves nothing in Redis
// (no fence counter per user of the sale: it is taken WithoutFence).
func TestService_oneUsersConcurrentOrders_limitHeldAndNoUserLockKeysLeft(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 11, Type: activity.Seckill, TotalStock: 100, PerUserLimit: 3})
	ctx, rdb := context.Background(), sh.RDB
	svc := sh.Service(ordertest.NoTasks{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 11, UserID: 5, Quantity: 1})
			key := "ok"
			switch {
			case errors.Is(err, activity.ErrLimitExceeded):
				key = "limit"
			case err != nil:
				key = err.Error()
			}
			mu.Lock()
			answers[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if answers["ok"] != 3 || answers["limit"] != 17 {
		t.Fatalf("answers %v, want 3 ok and 17 limit", answers)
	}
	if keys := rdb.Keys(ctx, "*order-user*").Val(); len(keys) != 0 {
		t.Fatalf("per-user lock keys left behind: %v", keys)
	}
}

// Get reads Redis while it keeps an order and MySQL's record after, and
// only for the order's owner.
func TestService_get_fromRedisThenFromMySQL_onlyForTheOwner(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 21, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	ctx := context.Background()
	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	records := mysqlstore.NewOrders(gdb)
	t.Cleanup(records.Close)
	svc := order.NewService(order.Deps{Store: sh.Store, Locks: redisstore.Locks{Locker: sh.Locks}, Tasks: ordertest.NoTasks{},
		Records: records, Log: ordertest.Log()}, order.Config{})

	placed, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 21, UserID: 4, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := svc.Get(ctx, placed.No, 4); err != nil || o.Persisted || o.Status != order.PendingPayment {
		t.Fatalf("from Redis: %+v, %v", o, err)
	}
	if err := records.Write(ctx, placed); err != nil {
		t.Fatal(err)
	}
	if err := sh.RDB.Del(ctx, rediskeys.For(21).Order(placed.No)).Err(); err != nil {
		t.Fatal(err) // its retention in Redis is over
	}
	if o, err := svc.Get(ctx, placed.No, 4); err != nil || !o.Persisted || o.No != placed.No || o.UserID != 4 {
		t.Fatalf("from MySQL: %+v, %v", o, err)
	}
	if _, err := svc.Get(ctx, placed.No, 5); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another user's order from MySQL: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, order.NewNo(21), 4); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("an order nobody has: %v, want ErrNotFound", err)
	}
	if _, err := svc.Get(ctx, "21-nope", 4); !errors.Is(err, order.ErrInvalid) {
		t.Fatalf("a malformed number: %v, want ErrInvalid", err)
	}
}

// A refusal says why in a message of its own, matched by its kind: the
// HTTP layer shows the message as it is.
func TestService_refusals_carryTheirKindAndMessage(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 22, Type: activity.Seckill, TotalStock: 1, PerUserLimit: 1},
		activity.Activity{ID: 23, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2, GroupTTL: time.Minute})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Cancel(ctx, o.No, 1); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		err  error
		kind error
		msg  string
	}{
		"pay a cancelled order": {func() error { _, err := svc.Pay(ctx, o.No, 1); return err }(), order.ErrConflict, "the order is cancelled"},
		"quantity 0": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 0})
			return err
		}(), order.ErrInvalid, "quantity must be between 1 and 1000"},
		"bad Idempotency-Key": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 22, UserID: 1, Quantity: 1, IdempotencyKey: "a b"})
			return err
		}(), order.ErrInvalid, "Idempotency-Key must be 1-64 printable ASCII characters"},
		"an order on a group buy": {func() error {
			_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 23, UserID: 1, Quantity: 1})
			return err
		}(), order.ErrWrongType, "a group buy's orders are placed by opening or joining a group"},
		"a group on a flash sale": {func() error {
			_, _, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 22, UserID: 2, Quantity: 1})
			return err
		}(), order.ErrWrongType, "groups are for group buys"},
		"a malformed order number": {func() error { _, err := svc.Pay(ctx, "22-x", 1); return err }(), order.ErrInvalid,
			`order number "22-x" is malformed`},
	} {
		if !errors.Is(tc.err, tc.kind) || refusal.Message(tc.err, "") != tc.msg {
			t.Errorf("%s: %v; want kind %v, message %q", name, tc.err, tc.kind, tc.msg)
		}
	}
}

// Once this process saw a sale sell out it refuses it without Redis, but
// never a request with an Idempotency-Key: that may be the retry of an
// accepted order, and gets it back.
func TestService_refusedHere_afterSellingOut_butNotARetry(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 24, Type: activity.Seckill, TotalStock: 1, PerUserLimit: 1})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	if svc.RefusedHere(24, "") {
		t.Fatal("refused before anything sold")
	}
	first, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 1, Quantity: 1, IdempotencyKey: "tap-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.RefusedHere(24, "") || svc.RefusedHere(24, "tap-1") || svc.RefusedHere(25, "") {
		t.Fatal("after the last unit: want refused here without a key, not with one, not for another sale")
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 2, Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("an order after the sale sold out: %v", err)
	}
	again, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 24, UserID: 1, Quantity: 1, IdempotencyKey: "tap-1"})
	if err != nil || again.No != first.No {
		t.Fatalf("the retry after the sale sold out: %+v, %v; want the first order %s", again, err, first.No)
	}
}
