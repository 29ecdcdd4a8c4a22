package payment_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const secret = "test-simulated-secret-0123456789abcdef"

// queued records the payment tasks the service queues.
type queued struct {
	mu       sync.Mutex
	records  []payment.Payment
	refunds  []payment.Payment
	refunded map[string]int // payment id → refunds queued
}

func (q *queued) RecordPayment(_ context.Context, p payment.Payment) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.records = append(q.records, p)
	return nil
}

func (q *queued) QueueRefund(_ context.Context, p payment.Payment) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.refunded == nil {
		q.refunded = map[string]int{}
	}
	q.refunds = append(q.refunds, p)
	q.refunded[p.ID]++
	return nil
}

func (q *queued) refundsOf(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.refunded[id]
}

// env is a sale on a real Redis with the order and payment services over
// it, the simulated provider sending no webhook of its own (the tests
// send the events).
type env struct {
	sh     *ordertest.Shop
	orders *order.Service
	pay    *payment.Service
	tasks  *queued
	prov   *paysim.Provider
}

func newEnv(t *testing.T, sales ...activity.Activity) *env {
	t.Helper()
	sh := ordertest.New(t, sales...)
	e := &env{sh: sh, tasks: &queued{}, prov: paysim.New(paysim.Config{Secret: secret})}
	e.pay = payment.NewService(payment.Deps{Provider: e.prov, Store: redisstore.NewPayments(sh.RDB), Tasks: e.tasks,
		Log: ordertest.Log()}, payment.Config{})
	d := sh.Deps(ordertest.NoTasks{})
	d.Payments = e.pay
	e.orders = order.NewService(d, order.Config{})
	e.pay.UseOrders(e.orders)
	return e
}

func (e *env) place(t *testing.T, act, user int64) order.Order {
	t.Helper()
	o, err := e.orders.Place(context.Background(), order.PlaceRequest{ActivityID: act, UserID: user, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// event is a signed succeeded webhook for payment pid of order no.
func (e *env) event(t *testing.T, id, kind, pid, no string, amount int64, currency string) error {
	t.Helper()
	body, err := json.Marshal(paysim.Event{ID: id, Type: kind, PaymentID: pid, OrderNo: no, AmountCents: amount,
		Currency: currency, Created: time.Now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{paysim.SignatureHeader: []string{paysim.Sign(body, secret, time.Now())}}
	return e.pay.HandleEvent(context.Background(), body, h)
}

// paying places user's order in sale act and starts its payment: the order
// and the payment's id.
func (e *env) paying(t *testing.T, act, user int64) (order.Order, string) {
	t.Helper()
	o := e.place(t, act, user)
	st, err := e.pay.Start(context.Background(), o.No, user)
	if err != nil {
		t.Fatal(err)
	}
	return o, st.Payment.ID
}

func (e *env) succeeded(t *testing.T, id, pid, no string, amount int64) error {
	return e.event(t, id, string(payment.PaymentSucceeded), pid, no, amount, "cny")
}

var flash = activity.Activity{ID: 51, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 5}

// One payment per order, whoever asks how often, for the order's amount
// and currency; another user's order is not found; an order that cannot
// be paid is refused, and the provider is not asked.
func TestService_start_onePaymentPerOrder_theOrdersAmount(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	first, err := e.pay.Start(ctx, o.No, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := first.Payment
	if p.ID == "" || p.ClientSecret == "" || p.AmountCents != o.AmountCents || p.Currency != "cny" || p.Status != payment.Pending ||
		first.Order.Status != order.PendingPayment {
		t.Fatalf("started %+v for order %+v", first, o)
	}
	again, err := e.pay.Start(ctx, o.No, 1)
	if err != nil || again.Payment.ID != p.ID {
		t.Fatalf("started again: %+v, %v; want payment %s", again.Payment, err, p.ID)
	}
	if _, err := e.pay.Start(ctx, o.No, 2); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("another user's order: %v, want ErrNotFound", err)
	}
	c := e.place(t, 51, 3)
	if _, err := e.orders.Cancel(ctx, c.No, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pay.Start(ctx, c.No, 3); !errors.Is(err, payment.ErrNotPayable) {
		t.Fatalf("a cancelled order: %v, want ErrNotPayable", err)
	}
	if n := len(e.tasks.records); n != 1 {
		t.Fatalf("%d payment records queued, want 1 (the one payment)", n)
	}
}

// A confirmation pays the order, naming its payment; the same event again,
// or the same payment confirmed in another event, changes nothing more and
// refunds nothing.
func TestService_confirmation_paysTheOrder_twiceIsOnce(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o, pid := e.paying(t, 51, 1)
	for i, id := range []string{"evt_a", "evt_a", "evt_b"} {
		if err := e.succeeded(t, id, pid, o.No, o.AmountCents); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	got, err := e.orders.Get(ctx, o.No, 1)
	if err != nil || got.Status != order.Paid || got.PaymentID != pid {
		t.Fatalf("the order after its confirmation: %+v, %v", got, err)
	}
	rec, err := redisstore.NewPayments(e.sh.RDB).Payment(ctx, o.No)
	if err != nil || rec.Status != payment.Succeeded || rec.ClientSecret == "" || rec.Flag != "" {
		t.Fatalf("the payment's record: %+v, %v", rec, err)
	}
	if n := len(e.tasks.refunds); n != 0 {
		t.Fatalf("%d refunds queued for money that paid its order", n)
	}
}

// Money that pays no order is recorded with its flag and refunded, once:
// late (the order cancelled), mismatched (another amount, another
// currency: the order stays payable), duplicate (the order paid by another
// payment), for an unknown order. Each event sent twice queues one refund.
func TestService_moneyThatPaysNoOrder_flaggedAndRefundedOnce(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()

	late := e.place(t, 51, 1)
	lateSt, err := e.pay.Start(ctx, late.No, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.orders.Cancel(ctx, late.No, 1); err != nil {
		t.Fatal(err)
	}
	mis := e.place(t, 51, 2)
	paid := e.place(t, 51, 3)
	st, _ := e.pay.Start(ctx, paid.No, 3)
	if err := e.succeeded(t, "evt_paid", st.Payment.ID, paid.No, paid.AmountCents); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, event, pid, no string
		amount               int64
		currency             string
		flag                 payment.Flag
	}{
		{"late: its own payment, after the order was cancelled", "evt_late", lateSt.Payment.ID, late.No, late.AmountCents, "cny", payment.Late},
		{"another amount", "evt_mis", "pi_mis", mis.No, mis.AmountCents + 1, "cny", payment.Mismatch},
		{"another currency", "evt_cur", "pi_cur", mis.No, mis.AmountCents, "usd", payment.Mismatch},
		{"paid by another payment", "evt_dup", "pi_dup", paid.No, paid.AmountCents, "cny", payment.Duplicate},
		{"an unknown order", "evt_unk", "pi_unk", "51-06H0J68TSYHN2J2MDXSS60AGDR", 100, "cny", payment.UnknownOrder},
		{"no order at all", "evt_none", "pi_none", "", 100, "cny", payment.UnknownOrder},
	}
	for _, c := range cases {
		for range 2 {
			if err := e.event(t, c.event, string(payment.PaymentSucceeded), c.pid, c.no, c.amount, c.currency); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if n := e.tasks.refundsOf(c.pid); n != 1 {
			t.Errorf("%s: %d refunds queued, want 1", c.name, n)
		}
		var flag payment.Flag
		for _, r := range e.tasks.refunds {
			if r.ID == c.pid {
				flag = r.Flag
			}
		}
		if flag != c.flag {
			t.Errorf("%s: flagged %q, want %q", c.name, flag, c.flag)
		}
	}
	if got, _ := e.orders.Get(ctx, mis.No, 2); got.Status != order.PendingPayment {
		t.Errorf("the mismatched order: %s, want still payable", got.Status)
	}
	if got, _ := e.orders.Get(ctx, late.No, 1); got.Status != order.Cancelled {
		t.Errorf("the late order: %s, want cancelled", got.Status)
	}
	if rec, err := redisstore.NewPayments(e.sh.RDB).Payment(ctx, late.No); err != nil || rec.Flag != payment.Late || rec.Status != payment.Succeeded {
		t.Errorf("the late payment's record: %+v, %v; want succeeded, flagged late", rec, err)
	}
	if got, _ := e.orders.Get(ctx, paid.No, 3); got.Status != order.Paid || got.PaymentID != st.Payment.ID {
		t.Errorf("the order paid first: %+v, want paid by %s", got, st.Payment.ID)
	}
}

// A webhook whose signature does not verify, or is too old, changes
// nothing: the order stays unpaid.
func TestService_badWebhook_changesNothing(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	body, _ := json.Marshal(paysim.Event{ID: "evt_x", Type: string(payment.PaymentSucceeded), PaymentID: "pi_x",
		OrderNo: o.No, AmountCents: o.AmountCents, Currency: "cny", Created: time.Now().Unix()})
	for name, h := range map[string]http.Header{
		"another secret": {paysim.SignatureHeader: []string{paysim.Sign(body, "not-the-secret", time.Now())}},
		"an old one":     {paysim.SignatureHeader: []string{paysim.Sign(body, secret, time.Now().Add(-10*time.Minute))}},
		"none":           {},
	} {
		if err := e.pay.HandleEvent(ctx, body, h); !errors.Is(err, payment.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	junk := []byte("not json")
	if err := e.pay.HandleEvent(ctx, junk, http.Header{paysim.SignatureHeader: []string{paysim.Sign(junk, secret, time.Now())}}); !errors.Is(err, payment.ErrBadEvent) {
		t.Errorf("a malformed body: %v, want ErrBadEvent", err)
	}
	if got, _ := e.orders.Get(ctx, o.No, 1); got.Status != order.PendingPayment {
		t.Fatalf("the order after bad webhooks: %s", got.Status)
	}
}

// A payment that failed (the shopper's bank refused) leaves the order
// payable with the same payment, and a later success pays it.
func TestService_failedThenSucceeded_paysWithTheSamePayment(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	st, _ := e.pay.Start(ctx, o.No, 1)
	if err := e.event(t, "evt_f", string(payment.PaymentFailed), st.Payment.ID, o.No, 0, "cny"); err != nil {
		t.Fatal(err)
	}
	again, err := e.pay.Start(ctx, o.No, 1)
	if err != nil || again.Payment.ID != st.Payment.ID || again.Payment.Status != payment.Failed {
		t.Fatalf("pay after a failure: %+v, %v", again.Payment, err)
	}
	if err := e.succeeded(t, "evt_s", st.Payment.ID, o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.orders.Get(ctx, o.No, 1); got.Status != order.Paid {
		t.Fatalf("after the success: %s", got.Status)
	}
}

// The worker's backstop (Settle, on each order's sync): money recorded by
// an api killed before it paid the order — the order then cancelled — is
// flagged late and given back, once it is refunded no more; a paid order's
// payment is recorded; a pending order is left alone.
func TestService_settle_givesBackMoneyThatPaidNothing_recordsWhatPaid(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	store := redisstore.NewPayments(e.sh.RDB)

	// The api recorded the money, then died before the order's transition.
	o := e.place(t, 51, 1)
	now := time.Now().UTC()
	if _, err := store.SavePayment(ctx, payment.Payment{ID: "pi_orphan", Provider: "simulated", OrderNo: o.No, ActivityID: 51,
		AmountCents: o.AmountCents, Currency: "cny", Status: payment.Succeeded, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	pending, _ := e.orders.Get(ctx, o.No, 1)
	if err := e.pay.Settle(ctx, pending); err != nil || e.tasks.refundsOf("pi_orphan") != 0 {
		t.Fatalf("settling a pending order: %v, %d refunds; want nothing done", err, e.tasks.refundsOf("pi_orphan"))
	}
	cancelled, err := e.orders.Cancel(ctx, o.No, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pay.Settle(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	if n := e.tasks.refundsOf("pi_orphan"); n != 1 {
		t.Fatalf("%d refunds queued for the money beside a cancelled order, want 1", n)
	}
	rec, err := store.Payment(ctx, o.No)
	if err != nil || rec.Flag != payment.Late || rec.Status != payment.Succeeded {
		t.Fatalf("its record: %+v, %v; want succeeded, flagged late", rec, err)
	}
	if _, err := e.pay.Refund(ctx, rec); err != nil { // the refund task ran
		t.Fatal(err)
	}
	if err := e.pay.Settle(ctx, cancelled); err != nil || e.tasks.refundsOf("pi_orphan") != 1 {
		t.Fatalf("settled again once refunded: %v, %d refunds queued; want still 1", err, e.tasks.refundsOf("pi_orphan"))
	}

	// A paid order's payment is recorded by its sync too.
	paid := e.place(t, 51, 2)
	st, err := e.pay.Start(ctx, paid.No, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.succeeded(t, "evt_settle_paid", st.Payment.ID, paid.No, paid.AmountCents); err != nil {
		t.Fatal(err)
	}
	now2, _ := e.orders.Get(ctx, paid.No, 2)
	before := len(e.tasks.records)
	if err := e.pay.Settle(ctx, now2); err != nil {
		t.Fatal(err)
	}
	if len(e.tasks.records) != before+1 || e.tasks.records[before].ID != st.Payment.ID || e.tasks.records[before].Status != payment.Succeeded {
		t.Fatalf("settling a paid order recorded %v, want its payment succeeded", e.tasks.records[before:])
	}
	if e.tasks.refundsOf(st.Payment.ID) != 0 {
		t.Fatal("a paid order's money was refunded")
	}
}
