package order_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// The per-order lock across a failover that loses a pay (made on the old
// primary, never replicated): the next change of the order gets a larger
// fence from the lock on the new primary, so it applies in Redis, and in
// MySQL the lost pay's write, were it ever to arrive, is older than the
// change and ignored.
func TestOrderLock_failoverLosingAPay_laterChangeFencedAbove(t *testing.T) {
	g := testenv.StartSentinelGroup(t, testenv.RedisConfig{}, 1, 3)
	rdb := g.Client(t)
	sh := ordertest.On(t, rdb, activity.Activity{ID: 41, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	svc := sh.Service(ordertest.NoTasks{})
	ctx := context.Background()
	placed, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 41, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	// An expiry (refused: not due) takes the order's lock first, so the
	// lock's fence counter exists, and the replica has it.
	if _, err := svc.Expire(ctx, placed.No); !errors.Is(err, order.ErrNotDue) {
		t.Fatalf("an early expiry: %v", err)
	}
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "probe", 1, 0)
		p.Do(ctx, "WAIT", 1, 5000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var lost order.Order
	g.FailOverLosing(t, func() {
		if lost, err = svc.ConfirmPaid(ctx, placed.No, "pi_test"); err != nil {
			t.Fatal(err)
		}
	})
	var cancelled order.Order
	for range 100 { // the client of the new primary reconnects
		if cancelled, err = svc.Cancel(ctx, placed.No, 1); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("cancelling on the new primary: %v", err)
	}
	if cancelled.Fence <= lost.Fence {
		t.Fatalf("the cancel's fence %d is not above the lost pay's %d", cancelled.Fence, lost.Fence)
	}

	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	rec := mysqlstore.NewOrders(gdb)
	t.Cleanup(rec.Close)
	if err := rec.Write(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	if err := rec.Write(ctx, lost); err != nil { // the stale holder's write arrives late
		t.Fatal(err)
	}
	if got, err := rec.Get(ctx, placed.No); err != nil || got.Status != order.Cancelled || got.Fence != cancelled.Fence {
		t.Fatalf("MySQL has %+v, %v; want the cancel, fence %d", got, err, cancelled.Fence)
	}
	t.Logf("lost pay fence %d, the cancel after the failover %d", lost.Fence, cancelled.Fence)
}
