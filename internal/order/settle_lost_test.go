package order_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
)

// answerLost runs a refund's transition and then answers as a timed-out
// WAIT does: the write landed, the caller is not told.
type answerLost struct {
	order.Store
	once sync.Once
}

func (s *answerLost) Transition(ctx context.Context, c order.Change) (order.Order, error) {
	o, err := s.Store.Transition(ctx, c)
	lost := false
	if err == nil && c.Action == order.Refund {
		s.once.Do(func() { lost = true })
	}
	if lost {
		return order.Order{}, fmt.Errorf("%w: not acknowledged by enough replicas in time", order.ErrUnavailable)
	}
	return o, err
}

// refunds counts the money asked back, per order.
type refunds struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refunds) Abandon(context.Context, string) error { return nil }
func (r *refunds) RefundOrder(_ context.Context, no string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[no]++
	return nil
}

// A failed group's paid member refunded by a settlement whose answer was
// lost (the write landed; the replicas' WAIT timed out) still has its money
// asked back: the settlement is retried, finds the order refunded, and
// tells the payments — which the first try never did. Seen in the soak:
// refunded members whose payment was never refunded.
func TestService_settle_refundAnswerLost_moneyStillAskedBack(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 36, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2, GroupTTL: time.Second})
	ctx := context.Background()
	d := sh.Deps(ordertest.NoTasks{})
	d.Store = &answerLost{Store: d.Store}
	pay := &refunds{n: map[string]int{}}
	d.Payments = pay
	svc := order.NewService(d, order.Config{})
	_, paid, err := svc.OpenGroup(ctx, order.PlaceRequest{ActivityID: 36, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ConfirmPaid(ctx, paid.No, "pi_lost"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the group's deadline passes, unfilled

	if err := svc.Settle(ctx, paid.GroupID); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("the settlement whose refund's answer was lost: %v, want ErrUnavailable (retried)", err)
	}
	if o, _ := sh.Store.Get(ctx, paid.No); o.Status != order.Refunded || pay.n[paid.No] != 0 {
		t.Fatalf("after the lost answer: %s, %d refunds asked; want refunded, none asked yet", o.Status, pay.n[paid.No])
	}
	if err := svc.Settle(ctx, paid.GroupID); err != nil {
		t.Fatal(err)
	}
	if n := pay.n[paid.No]; n != 1 {
		t.Fatalf("the retried settlement asked %d refunds of the refunded member, want 1", n)
	}
}
