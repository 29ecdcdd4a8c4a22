package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// atProvider is payment id as the simulated provider holds it.
func (e *env) atProvider(t *testing.T, act int64, id string) payment.Intent {
	t.Helper()
	list, err := e.prov.Payments(context.Background(), act, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("payment %s unknown to the provider (it has %+v)", id, list)
	return payment.Intent{}
}

// recorded is order no's payment as the service records it live (Redis).
func (e *env) recorded(t *testing.T, no string) payment.Payment {
	t.Helper()
	p, err := redisstore.NewPayments(e.sh.RDB).Payment(context.Background(), no)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An unpaid order that ends — cancelled by its shopper, expired at its
// pay_by — has its provider payment cancelled, so that it cannot be paid
// later: the provider holds it canceled, the record says canceled, and the
// worker is asked to write that into MySQL.
func TestService_unpaidOrderCancelledOrExpired_cancelsItsProviderPayment(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		user int64
		end  func(no string) (order.Order, error)
	}{
		{"cancelled by the shopper", 1, func(no string) (order.Order, error) { return e.orders.Cancel(ctx, no, 1) }},
		{"expired at pay_by", 2, func(no string) (order.Order, error) {
			ordertest.SetOrder(t, e.sh.RDB, no, "pay_by_ms", time.Now().Add(-time.Second).UnixMilli())
			return e.orders.Expire(ctx, no)
		}},
	} {
		o := e.place(t, 51, tc.user)
		st, err := e.pay.Start(ctx, o.No, tc.user)
		if err != nil {
			t.Fatal(err)
		}
		pid := st.Payment.ID
		if in := e.atProvider(t, 51, pid); in.Status != payment.Pending {
			t.Fatalf("%s: the provider's payment before: %s, want pending", tc.name, in.Status)
		}
		ended, err := tc.end(o.No)
		if err != nil || ended.Status != order.Cancelled {
			t.Fatalf("%s: the order: %+v, %v; want cancelled", tc.name, ended, err)
		}
		if in := e.atProvider(t, 51, pid); in.Status != payment.Canceled {
			t.Errorf("%s: the provider's payment: %s, want canceled", tc.name, in.Status)
		}
		if p := e.recorded(t, o.No); p.ID != pid || p.Status != payment.Canceled {
			t.Errorf("%s: the payment's record: %+v; want %s canceled", tc.name, p, pid)
		}
		e.tasks.mu.Lock()
		last := e.tasks.records[len(e.tasks.records)-1]
		e.tasks.mu.Unlock()
		if last.ID != pid || last.Status != payment.Canceled {
			t.Errorf("%s: the last record queued for MySQL: %+v; want %s canceled", tc.name, last, pid)
		}
	}
}

var groupBuy = activity.Activity{ID: 52, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 2,
	GroupTTL: 300 * time.Millisecond}

// runRefunds runs every refund queued so far, as the worker's refund
// tasks would — each task, even one the queue's TaskID would have refused
// as a repeat — and returns how many ran.
func (e *env) runRefunds(t *testing.T) int {
	t.Helper()
	e.tasks.mu.Lock()
	queued := append([]payment.Payment(nil), e.tasks.refunds...)
	e.tasks.mu.Unlock()
	for _, p := range queued {
		if _, err := e.pay.Refund(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	return len(queued)
}

// refundsAt is how many refunds the provider made of payment id.
func (e *env) refundsAt(t *testing.T, id string) int {
	t.Helper()
	list, err := e.prov.Refunds(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// Money confirmed after the order's group failed is given back, once at
// the provider: whether the confirmation comes after the group's deadline
// but before it was settled (the group closed: the order cannot be paid
// into it), or after the settlement cancelled the order (and its payment
// at the provider). Each confirmation comes twice and in another event
// too, and the late group's settlement comes after (the worker's Settle,
// its backstop): the payment is flagged late, the order stays unpaid, and
// the provider refunds it once, whatever tasks were queued.
func TestService_moneyAfterTheGroupFailed_refundedOnce(t *testing.T) {
	e := newEnv(t, groupBuy)
	ctx := context.Background()
	open := func(user int64) (string, order.Order, string) {
		t.Helper()
		g, o, err := e.orders.OpenGroup(ctx, order.PlaceRequest{ActivityID: 52, UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.pay.Start(ctx, o.No, user)
		if err != nil {
			t.Fatal(err)
		}
		return g.ID, o, st.Payment.ID
	}
	closedGid, closed, closedPid := open(1)
	failedGid, failed, failedPid := open(2)
	time.Sleep(groupBuy.GroupTTL + 100*time.Millisecond)
	if err := e.orders.Settle(ctx, failedGid); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.orders.Get(ctx, failed.No, 2); got.Status != order.Cancelled {
		t.Fatalf("the settled group's unpaid order: %s, want cancelled", got.Status)
	}
	if in := e.atProvider(t, 52, failedPid); in.Status != payment.Canceled {
		t.Errorf("the settled group's payment at the provider: %s, want canceled", in.Status)
	}

	for _, c := range []struct {
		name, pid string
		o         order.Order
	}{
		{"the group past its deadline, not yet settled", closedPid, closed},
		{"the group failed and settled", failedPid, failed},
	} {
		for _, ev := range []string{"evt_" + c.pid, "evt_" + c.pid, "evt_again_" + c.pid} {
			if err := e.succeeded(t, ev, c.pid, c.o.No, c.o.AmountCents); err != nil {
				t.Fatalf("%s: %s: %v", c.name, ev, err)
			}
		}
		if n := e.tasks.refundsOf(c.pid); n == 0 {
			t.Errorf("%s: no refund queued", c.name)
		}
		if p := e.recorded(t, c.o.No); p.ID != c.pid || p.Status != payment.Succeeded || p.Flag != payment.Late {
			t.Errorf("%s: the payment's record: %+v; want succeeded, flagged late", c.name, p)
		}
		if got, _ := e.orders.Get(ctx, c.o.No, 0); got.Status == order.Paid || got.PaymentID != "" {
			t.Errorf("%s: the order: %+v; want unpaid", c.name, got)
		}
	}
	// The late group settled after its money came: the order is
	// cancelled, and the money, given back already, is not given back
	// again (Settle, the worker's backstop, runs on the order's sync).
	if err := e.orders.Settle(ctx, closedGid); err != nil {
		t.Fatal(err)
	}
	now, err := e.orders.Get(ctx, closed.No, 0)
	if err != nil || now.Status != order.Cancelled {
		t.Fatalf("the late group's order once settled: %+v, %v", now, err)
	}
	if err := e.pay.Settle(ctx, now); err != nil {
		t.Fatal(err)
	}
	ran := e.runRefunds(t)
	for _, pid := range []string{closedPid, failedPid} {
		if n := e.refundsAt(t, pid); n != 1 {
			t.Errorf("payment %s: %d refunds at the provider (%d refund tasks ran), want 1", pid, n, ran)
		}
	}
	// Refunded, and recorded so: another confirmation or settlement queues
	// nothing more.
	queued := len(e.tasks.refunds)
	if err := e.succeeded(t, "evt_after_refund", closedPid, closed.No, closed.AmountCents); err != nil {
		t.Fatal(err)
	}
	if err := e.pay.Settle(ctx, now); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tasks.refunds); n != queued {
		t.Errorf("%d refunds queued for money refunded already", n-queued)
	}
}

// An event older than what is known changes nothing: a payment that
// succeeded (and paid its order) stays succeeded when a payment_failed or
// payment_canceled of it arrives after, in events of their own ids; so
// does late money (flagged, refunded once). Nothing more is recorded or
// refunded.
func TestService_staleFailedOrCanceledAfterSuccess_changesNothing(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	paid := e.place(t, 51, 1)
	st, err := e.pay.Start(ctx, paid.No, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.succeeded(t, "evt_ok", st.Payment.ID, paid.No, paid.AmountCents); err != nil {
		t.Fatal(err)
	}
	late := e.place(t, 51, 2)
	lateSt, err := e.pay.Start(ctx, late.No, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.orders.Cancel(ctx, late.No, 2); err != nil {
		t.Fatal(err)
	}
	if err := e.succeeded(t, "evt_late", lateSt.Payment.ID, late.No, late.AmountCents); err != nil {
		t.Fatal(err)
	}
	e.tasks.mu.Lock()
	records, refunds := len(e.tasks.records), len(e.tasks.refunds)
	e.tasks.mu.Unlock()

	for _, c := range []struct {
		name string
		o    order.Order
		pid  string
		want order.Status
		flag payment.Flag
	}{
		{"paid", paid, st.Payment.ID, order.Paid, ""},
		{"late", late, lateSt.Payment.ID, order.Cancelled, payment.Late},
	} {
		for _, kind := range []payment.EventKind{payment.PaymentFailed, payment.PaymentCanceled} {
			if err := e.event(t, "evt_stale_"+string(kind)+"_"+c.pid, string(kind), c.pid, c.o.No, c.o.AmountCents, "cny"); err != nil {
				t.Fatalf("%s: a stale %s: %v", c.name, kind, err)
			}
		}
		if p := e.recorded(t, c.o.No); p.ID != c.pid || p.Status != payment.Succeeded || p.Flag != c.flag {
			t.Errorf("%s: the payment's record after stale events: %+v; want succeeded, flag %q", c.name, p, c.flag)
		}
		if got, _ := e.orders.Get(ctx, c.o.No, 0); got.Status != c.want {
			t.Errorf("%s: the order after stale events: %s, want %s", c.name, got.Status, c.want)
		}
	}
	e.tasks.mu.Lock()
	defer e.tasks.mu.Unlock()
	if len(e.tasks.records) != records || len(e.tasks.refunds) != refunds {
		t.Errorf("stale events queued %d records and %d refunds, want none", len(e.tasks.records)-records, len(e.tasks.refunds)-refunds)
	}
}
