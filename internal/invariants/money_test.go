package invariants_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// A settled flash sale's money made with the real order path and the
// simulated provider — an order paid, late money for a cancelled order
// refunded through the provider, an order still pending — passes Settled
// and the provider's checks; each way of breaking the money fails the
// checks it should, and only while broken: a refund of no payment, late
// money never refunded, more refunded than paid, a payment refunded twice
// at the provider (invisible to MySQL, whose refunds hold one row per
// payment), a refund made at the provider and never recorded.
func TestMoney_passesASettledSalesMoney_andCatchesEachBreak(t *testing.T) {
	ctx := context.Background()
	rdb, gdb, db, a, sh := liveSale(t)
	svc := sh.Service(ordertest.NoTasks{}) // this test is the worker: it writes MySQL itself
	orders, payRecs := mysqlstore.NewOrders(gdb), mysqlstore.NewPayments(gdb)
	t.Cleanup(orders.Close)
	sim := paysim.New(paysim.Config{Secret: "invariants-simulated-secret-0123456789"})
	var prov invariants.ProviderRefunds = sim
	place := func(user int64) order.Order {
		t.Helper()
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: a.ID, UserID: user, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	write := func(p payment.Payment) {
		t.Helper()
		if err := payRecs.WritePayment(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	confirmed := func(id string, o order.Order) payment.Payment {
		return payment.Payment{ID: id, Provider: "simulated", OrderNo: o.No, ActivityID: a.ID, AmountCents: o.AmountCents,
			Currency: "cny", Status: payment.Succeeded}
	}
	paid, cancelled := place(1), place(2)
	_ = place(3) // pending payment, its pay_by a minute away
	if _, err := svc.ConfirmPaid(ctx, paid.No, "sim_pi_paid"); err != nil {
		t.Fatal(err)
	}
	write(confirmed("sim_pi_paid", paid))
	live := redisstore.NewPayments(rdb)
	if _, err := live.SavePayment(ctx, confirmed("sim_pi_paid", paid)); err != nil {
		t.Fatal(err)
	}
	payments := rediskeys.For(a.ID).Payments
	record := rdb.HGet(ctx, payments, paid.No).Val()
	if _, err := svc.Cancel(ctx, cancelled.No, 2); err != nil {
		t.Fatal(err)
	}
	late := confirmed("sim_pi_late", cancelled)
	late.Flag = payment.Late
	var err error
	if late.RefundID, err = sim.Refund(ctx, late.ID, late.AmountCents, payment.RefundKey(late.ID)); err != nil {
		t.Fatal(err)
	}
	write(late)
	for _, no := range []string{paid.No, cancelled.No} {
		o, err := sh.Store.Get(ctx, no)
		if err != nil {
			t.Fatal(err)
		}
		if err := orders.Write(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	check := func() invariants.Report {
		t.Helper()
		r, err := invariants.Settled(ctx, rdb, db, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckProviderRefunds(ctx, db, a.ID, prov); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := check()
	if !r.OK() || r.Money.Confirmed != 2 || r.Money.Refunds != 1 || r.Money.PaidCents != 200 || r.Money.RefundedCents != 100 {
		t.Fatalf("a sound sale's money fails or miscounts (%+v):\n%s", r.Money, r)
	}

	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The provider that refunded the late money twice: under its key, and
	// under another (a refund retried with a key not the payment's).
	twice := paysim.New(paysim.Config{Secret: "invariants-simulated-secret-0123456789"})
	for _, key := range []string{payment.RefundKey(late.ID), "flashsale-refund-retry-" + late.ID} {
		if _, err := twice.Refund(ctx, late.ID, late.AmountCents, key); err != nil {
			t.Fatal(err)
		}
	}
	// A provider that refunded the paid order's money too, unrecorded.
	unrecorded := paysim.New(paysim.Config{Secret: "invariants-simulated-secret-0123456789"})
	for _, id := range []string{late.ID, "sim_pi_paid"} {
		if _, err := unrecorded.Refund(ctx, id, 100, payment.RefundKey(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		break_, fix func()
		want        []string // the checks that must fail, all others pass
	}{
		{"a refund of no payment",
			func() {
				exec("INSERT INTO refunds (refund_id, payment_id, order_no, amount_cents, currency, reason, created_at) "+
					"VALUES ('sim_re_ghost', 'sim_pi_ghost', ?, 50, 'cny', 'late', NOW())", cancelled.No)
			},
			func() { exec("DELETE FROM refunds WHERE payment_id = 'sim_pi_ghost'") },
			[]string{"every refund has its confirmed payment"}},
		{"a refund of no payment, for an order of a shard",
			func() {
				exec("INSERT INTO refunds (refund_id, payment_id, order_no, amount_cents, currency, reason, created_at) "+
					"VALUES ('sim_re_ghost', 'sim_pi_ghost', ?, 50, 'cny', 'late', NOW())", order.InShard(cancelled.No, 3, 4))
			},
			func() { exec("DELETE FROM refunds WHERE payment_id = 'sim_pi_ghost'") },
			[]string{"every refund has its confirmed payment"}},
		{"late money never refunded",
			func() { exec("DELETE FROM refunds WHERE payment_id = ?", late.ID) },
			func() { write(late) },
			[]string{"every confirmed payment paid its order or was refunded", "every provider refund recorded"}},
		{"more refunded than paid",
			func() { exec("UPDATE refunds SET amount_cents = 1000 WHERE payment_id = ?", late.ID) },
			func() { exec("UPDATE refunds SET amount_cents = ? WHERE payment_id = ?", late.AmountCents, late.ID) },
			[]string{"refunds never exceed payments"}},
		{"a payment refunded twice at the provider",
			func() { prov = twice }, func() { prov = sim },
			[]string{"nothing refunded twice (provider)", "every provider refund recorded"}}, // the second refund has no row
		{"a refund at the provider never recorded",
			func() { prov = unrecorded }, func() { prov = sim },
			[]string{"every provider refund recorded"}},
		{"a paid order's live record names another payment",
			func() { rdb.HSet(ctx, payments, paid.No, strings.Replace(record, "sim_pi_paid", "sim_pi_other", 1)) },
			func() { rdb.HSet(ctx, payments, paid.No, record) },
			[]string{"every paid order's live payment record names its payment"}},
		{"a paid order's live record lost",
			func() { rdb.HDel(ctx, payments, paid.No) },
			func() { rdb.HSet(ctx, payments, paid.No, record) },
			[]string{"every paid order's live payment record names its payment"}},
		{"a refunded order whose paying payment the provider kept",
			func() { exec("UPDATE orders SET status = 'refunded' WHERE order_no = ?", paid.No) },
			func() { exec("UPDATE orders SET status = 'paid' WHERE order_no = ?", paid.No) },
			[]string{"every refunded order's paying payment refunded (provider)"}},
	} {
		tc.break_()
		if got := failed(check()); got != strings.Join(tc.want, ",") {
			t.Errorf("%s: failed %q, want %q\n%s", tc.name, got, tc.want, check())
		}
		tc.fix()
		if r := check(); !r.OK() {
			t.Fatalf("after fixing %s:\n%s", tc.name, r)
		}
	}
}
