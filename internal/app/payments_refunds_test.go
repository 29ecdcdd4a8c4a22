package app_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/testenv"
)

// newRecordedStripeStack is a stack whose payments go to stripe-mock
// through a recorder (testenv.StripeRecorder): what the api and the
// workers asked of Stripe, with their idempotency keys and form bodies.
// It starts no worker.
func newRecordedStripeStack(t *testing.T) (*stack, *testenv.StripeRecorder) {
	t.Helper()
	rec := testenv.StartStripeMock(t).Recorder(t)
	s := newStackWith(t, "", map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_e2e",
		"STRIPE_WEBHOOK_SECRET": stripeWebhookSecret, "STRIPE_API_URL": rec.URL})
	return s, rec
}

// refundsOf is the refund requests sent to Stripe for PaymentIntent pi.
func refundsOf(rec *testenv.StripeRecorder, pi string) []testenv.StripeRequest {
	var out []testenv.StripeRequest
	for _, q := range rec.Requests("POST /v1/refunds") {
		if q.Form.Get("payment_intent") == pi {
			out = append(out, q)
		}
	}
	return out
}

// A worker killed -9 after Stripe made the refund and before the worker
// wrote it, its task then run again by the next worker (asynq recovers
// the dead worker's task), a second refund task for the same payment, and
// the webhook replayed: every refund request of the payment carries the
// payment's one idempotency key — one refund at Stripe, which answers a
// repeated key with the refund it made — and MySQL holds one refund row.
func TestPayments_stripe_workerKilledMidRefund_retriedAndRunTwice_refundsOnce(t *testing.T) {
	waits(t)
	s, rec := newRecordedStripeStack(t)
	first := s.workerProcess(t.Name())
	var once sync.Once
	rec.OnAnswered(func(q testenv.StripeRequest) {
		if q.Method == "POST" && q.Path == "/v1/refunds" {
			once.Do(first.Kill) // the refund is made at Stripe; its answer never reaches the worker
		}
	})
	act := s.sale(10, 2, 600)
	no := s.order(1, act, 1).str("order_no")
	pi := "pi_killed_" + no
	// Money of another amount: it pays no order, and is given back.
	if w := s.succeeded("evt_killed", pi, no, 499); w.code != 200 {
		t.Fatalf("webhook: %d %v", w.code, w.body)
	}
	select {
	case <-first.Exited():
	case <-time.After(60 * time.Second):
		t.Fatal("the worker never asked Stripe for the refund")
	}
	if n := s.count("SELECT COUNT(*) FROM refunds WHERE payment_id = ?", pi); n != 0 {
		t.Fatalf("%d refund rows written by a worker killed before it could write one", n)
	}
	// asynq gives the dead worker's task to the next one once its lease has
	// run out (30 s, plus 30 s of allowance for clock skew).
	s.workerProcess(t.Name())
	s.waitMySQL(1, 150*time.Second, "SELECT COUNT(*) FROM refunds WHERE payment_id = ?", pi)
	retried := refundsOf(rec, pi)
	if len(retried) < 2 {
		t.Fatalf("%d refund requests for %s, want the killed one and its retry", len(retried), pi)
	}

	// The refund task run again, as a second task (its TaskID gone, say):
	// the same key again.
	p := payment.Payment{ID: pi, Provider: "stripe", OrderNo: no, ActivityID: act, AmountCents: 499, Currency: "cny",
		Status: payment.Succeeded, Flag: payment.Mismatch}
	payload, err := json.Marshal(map[string]payment.Payment{"payment": p})
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClientFromRedisClient(s.rdb())
	if _, err := client.Enqueue(asynq.NewTask(tasks.TypePaymentRefund, payload), asynq.Queue(tasks.QueueName)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(refundsOf(rec, pi)) == len(retried) {
		if time.Now().After(deadline) {
			t.Fatal("the second refund task never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And the confirmation replayed in another event: no task at all.
	if w := s.succeeded("evt_killed_again", pi, no, 499); w.code != 200 {
		t.Fatalf("the replayed webhook: %d %v", w.code, w.body)
	}
	time.Sleep(time.Second)

	all := refundsOf(rec, pi)
	if len(all) != len(retried)+1 {
		t.Errorf("%d refund requests, want %d: the replayed webhook asked for another", len(all), len(retried)+1)
	}
	for i, q := range all {
		if q.IdempotencyKey != payment.RefundKey(pi) || q.Form.Get("amount") != "499" || q.Status != 200 {
			t.Errorf("refund request %d: key %q, amount %s, answered %d; want key %q, amount 499, 200",
				i, q.IdempotencyKey, q.Form.Get("amount"), q.Status, payment.RefundKey(pi))
		}
	}
	if n := s.count("SELECT COUNT(*) FROM refunds WHERE payment_id = ?", pi); n != 1 {
		t.Fatalf("%d refund rows for %s, want 1", n, pi)
	}
	if n := s.count("SELECT COUNT(*) FROM refunds"); n != 1 {
		t.Fatalf("%d refund rows, want 1", n)
	}
}

// An unpaid order that ends has its PaymentIntent cancelled at Stripe, so
// that it cannot be paid later: the shopper's cancel (by the api) and the
// expiry at pay_by (by the worker) each send POST
// /v1/payment_intents/{id}/cancel for the order's payment, and the worker
// records it canceled.
func TestPayments_stripe_unpaidOrderCancelledOrExpired_cancelsThePaymentIntent(t *testing.T) {
	waits(t)
	s, rec := newRecordedStripeStack(t)
	s.worker()
	act := s.sale(10, 2, 10) // 10 s to pay: the shortest allowed
	cancelled, expired := s.order(1, act, 1).str("order_no"), s.order(2, act, 1).str("order_no")
	pis := map[string]string{}
	for user, no := range map[int64]string{1: cancelled, 2: expired} {
		p := s.pay(user, no)
		if p.code != 200 || p.str("payment_id") == "" {
			t.Fatalf("pay: %d %v", p.code, p.body)
		}
		pis[no] = p.str("payment_id")
	}
	cancels := func(pi string) int {
		return len(rec.Requests("POST /v1/payment_intents/" + pi + "/cancel"))
	}
	if c := s.call("POST", "/v1/orders/"+cancelled+"/cancel", s.bearer(1), ""); c.code != 200 {
		t.Fatalf("cancel: %d %v", c.code, c.body)
	}
	if n := cancels(pis[cancelled]); n != 1 {
		t.Fatalf("the shopper's cancel sent %d cancels of %s to Stripe, want 1", n, pis[cancelled])
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'cancelled'", expired)
	deadline := time.Now().Add(10 * time.Second)
	for cancels(pis[expired]) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := cancels(pis[expired]); n != 1 {
		t.Fatalf("the expiry sent %d cancels of %s to Stripe, want 1", n, pis[expired])
	}
	for _, no := range []string{cancelled, expired} {
		s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM payments WHERE id = ? AND order_no = ? AND status = 'canceled'", pis[no], no)
	}
}
