package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// withRecords gives e's payment service the record of payments in a fresh
// MariaDB database (the admin's views read it), and returns it: the test
// writes into it what the worker would.
func (e *env) withRecords(t *testing.T) *mysqlstore.Payments {
	t.Helper()
	gdb, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	db, _ := gdb.DB()
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	recs := mysqlstore.NewPayments(gdb)
	e.pay = payment.NewService(payment.Deps{Provider: e.prov, Store: redisstore.NewPayments(e.sh.RDB), Tasks: e.tasks,
		Records: recs, Orders: e.orders, Log: ordertest.Log()}, payment.Config{})
	return recs
}

// ids are the payments' ids, in order.
func ids[T payment.Intent | payment.Payment](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		switch v := any(v).(type) {
		case payment.Intent:
			out[i] = v.ID
		case payment.Payment:
			out[i] = v.ID
		}
	}
	return out
}

func sameIDs(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	for _, id := range want {
		if !seen[id] {
			return false
		}
	}
	return true
}

// The reconciliation of a sale against the provider names what needs an
// operator: a payment the provider has and MySQL does not (missing), one
// whose amount differs between them, and confirmed money owed back and not
// yet refunded (late money; a paid order since refunded) — while a payment
// recorded as the provider has it, and flagged money already refunded, need
// nothing. Once the worker has written the missing payment and made both
// refunds, only the differing amount is left: a record's amount is the
// first write's, never rewritten, so it stays for an operator.
func TestService_reconcile_missingAmountDiffersRefundsPending(t *testing.T) {
	e := newEnv(t, flash)
	recs := e.withRecords(t)
	ctx := context.Background()
	start := func(user int64) (order.Order, payment.Payment) {
		t.Helper()
		o := e.place(t, 51, user)
		st, err := e.pay.Start(ctx, o.No, user)
		if err != nil {
			t.Fatal(err)
		}
		return o, st.Payment
	}
	write := func(p payment.Payment) {
		t.Helper()
		if err := recs.WritePayment(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_, missing := start(1) // never recorded
	_, differs := start(2)
	wrong := differs
	wrong.AmountCents++
	write(wrong)
	_, same := start(3)
	write(same)
	lateOrder, late := start(4)
	if _, err := e.orders.Cancel(ctx, lateOrder.No, 4); err != nil {
		t.Fatal(err)
	}
	if err := e.succeeded(t, "evt_late", late.ID, lateOrder.No, lateOrder.AmountCents); err != nil {
		t.Fatal(err)
	}
	late = e.recorded(t, lateOrder.No)
	write(late) // recorded flagged, its refund still queued
	refundedOrder, refunded := start(5)
	if err := e.succeeded(t, "evt_paid", refunded.ID, refundedOrder.No, refundedOrder.AmountCents); err != nil {
		t.Fatal(err)
	}
	refunded = e.recorded(t, refundedOrder.No)
	write(refunded)
	// The order refunded since (a failed group's paid member is; a flash
	// sale's order is set so by hand here), its money not yet given back.
	ordertest.SetOrder(t, e.sh.RDB, refundedOrder.No, "status", string(order.Refunded))

	r, err := e.pay.Reconcile(ctx, 51, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.InSync() || r.AtProvider != 5 || r.Recorded != 4 ||
		!sameIDs(ids(r.Missing), missing.ID) || !sameIDs(ids(r.AmountDiffers), differs.ID) ||
		!sameIDs(ids(r.RefundsPending), late.ID, refunded.ID) || !sameIDs(ids(r.Flagged), late.ID) {
		t.Fatalf("reconciled %d at the provider, %d recorded: missing %v, amount differs %v, refunds pending %v, flagged %v; "+
			"want 5, 4: missing [%s], differs [%s], pending [%s %s], flagged [%s]",
			r.AtProvider, r.Recorded, ids(r.Missing), ids(r.AmountDiffers), ids(r.RefundsPending), ids(r.Flagged),
			missing.ID, differs.ID, late.ID, refunded.ID, late.ID)
	}

	// The worker catches up: the missing payment written, both refunds
	// made and written; the right amount written again changes nothing.
	write(missing)
	write(differs)
	for _, p := range []payment.Payment{late, refunded} {
		done, err := e.pay.Refund(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		write(done)
	}
	r, err = e.pay.Reconcile(ctx, 51, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !sameIDs(ids(r.AmountDiffers), differs.ID) || len(r.Missing) != 0 || len(r.RefundsPending) != 0 ||
		!sameIDs(ids(r.Flagged), late.ID) {
		t.Fatalf("once caught up: missing %v, differs %v, pending %v, flagged %v; want only %s differing",
			ids(r.Missing), ids(r.AmountDiffers), ids(r.RefundsPending), ids(r.Flagged), differs.ID)
	}
}
