package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/testenv"
)

const stripeWebhookSecret = "whsec_e2e_0123456789abcdef0123456789"

// newStripeStack is a stack whose payments go to Stripe — stripe-mock, a
// real server that validates every request against Stripe's API — with a
// worker, for its refunds and records.
func newStripeStack(t *testing.T) *stack {
	t.Helper()
	mock := testenv.StartStripeMock(t)
	s := newStackWith(t, "", map[string]string{"PAYMENT_PROVIDER": "stripe", "STRIPE_SECRET_KEY": "sk_test_e2e",
		"STRIPE_WEBHOOK_SECRET": stripeWebhookSecret, "STRIPE_API_URL": mock.URL})
	s.worker()
	return s
}

// stripeEvent is a payment_intent event as Stripe sends it.
func stripeEvent(id, typ, pi, no string, amount int64, currency string) string {
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "type": typ, "api_version": "2025-10-29.clover", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": pi, "object": "payment_intent", "amount": amount, "amount_received": amount, "currency": currency,
			"status": "succeeded", "metadata": map[string]string{"order_no": no},
		}},
	})
	return string(b)
}

// webhook posts body to /webhooks/stripe signed with secret at at, with
// stripe-go's own test helper: Stripe's scheme.
func (s *stack) webhook(body, secret string, at time.Time) reply {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: at})
	return s.call("POST", "/webhooks/stripe", "", body, "Stripe-Signature", sp.Header, "Content-Type", "application/json")
}

func (s *stack) succeeded(event, pi, no string, amount int64) reply {
	return s.webhook(stripeEvent(event, "payment_intent.succeeded", pi, no, amount, "cny"), stripeWebhookSecret, time.Now())
}

func (s *stack) orderOf(user int64, no string) reply {
	return s.call("GET", "/v1/orders/"+no, s.bearer(user), "")
}

// The flow against Stripe's API: pay starts a PaymentIntent for the
// order's amount and currency and answers its client secret, the order
// still unpaid, the same payment however often; only Stripe's signed
// webhook pays it; the same event again, or the payment confirmed in
// another event, changes nothing more and refunds nothing; the worker
// records the payment.
func TestPayments_stripe_payStartsAPayment_onlyTheSignedWebhookPaysTheOrder(t *testing.T) {
	s := newStripeStack(t)
	act := s.sale(10, 2, 600)
	r := s.order(1, act, 2)
	if r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	no := r.str("order_no")
	p := s.pay(1, no)
	if p.code != 200 || p.str("status") != "pending_payment" || p.str("payment_id") == "" || p.str("client_secret") == "" ||
		p.body["amount_cents"] != float64(1000) || p.str("currency") != "cny" || p.str("provider") != "stripe" {
		t.Fatalf("pay: %d %v; want the payment started, the order still unpaid", p.code, p.body)
	}
	if again := s.pay(1, no); again.code != 200 || again.str("payment_id") != p.str("payment_id") {
		t.Fatalf("pay again: %d %v; want payment %s", again.code, again.body, p.str("payment_id"))
	}
	if o := s.orderOf(1, no); o.str("status") != "pending_payment" {
		t.Fatalf("the order before the webhook: %v", o.body)
	}
	pi := "pi_e2e_" + no
	for i, ev := range []string{"evt_1", "evt_1", "evt_2"} {
		if w := s.succeeded(ev, pi, no, 1000); w.code != 200 {
			t.Fatalf("webhook %d: %d %v", i, w.code, w.body)
		}
	}
	if o := s.orderOf(1, no); o.str("status") != "paid" {
		t.Fatalf("the order after the webhook: %v", o.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM payments WHERE id = ? AND status = 'succeeded' AND flag = ''", pi)
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'paid'", no)
	time.Sleep(500 * time.Millisecond) // a refund wrongly queued would be written by now
	if n := s.count("SELECT COUNT(*) FROM refunds"); n != 0 {
		t.Fatalf("%d refunds for money that paid its order", n)
	}
	adm := s.admin("GET", "/admin/v1/orders/"+no, "")
	if adm.code != 200 || adm.str("payment_id") != pi {
		t.Fatalf("the admin's view of the order: %d %v", adm.code, adm.body)
	}
}

// Bad input changes nothing: a webhook with a bad signature or an old
// timestamp (a replay) is 400 INVALID_SIGNATURE, a malformed body 400,
// another provider's path 404; a confirmation of the wrong amount or for
// an unknown order is recorded flagged and refunded, the order untouched;
// paying someone else's order is 404.
func TestPayments_stripe_badWebhooksAndPays_changeNothing(t *testing.T) {
	s := newStripeStack(t)
	act := s.sale(10, 2, 600)
	no := s.order(1, act, 1).str("order_no")
	body := stripeEvent("evt_bad", "payment_intent.succeeded", "pi_bad", no, 500, "cny")
	for name, w := range map[string]reply{
		"another secret":   s.webhook(body, "whsec_not_ours", time.Now()),
		"an old timestamp": s.webhook(body, stripeWebhookSecret, time.Now().Add(-10*time.Minute)),
		"no signature":     s.call("POST", "/webhooks/stripe", "", body, "Content-Type", "application/json"),
	} {
		if w.code != 400 || w.errCode() != "INVALID_SIGNATURE" {
			t.Errorf("%s: %d %v; want 400 INVALID_SIGNATURE", name, w.code, w.body)
		}
	}
	junk := `{"object":"event","id":"evt_junk","type":"payment_intent.succeeded","data":{"object":{"amount":"lots"}}}`
	if w := s.webhook(junk, stripeWebhookSecret, time.Now()); w.code != 400 || w.errCode() != "INVALID_ARGUMENT" {
		t.Errorf("a malformed event: %d %v; want 400 INVALID_ARGUMENT", w.code, w.body)
	}
	if w := s.call("POST", "/webhooks/paypal", "", body, "Content-Type", "application/json"); w.code != 404 {
		t.Errorf("another provider's path: %d %v; want 404", w.code, w.body)
	}
	if o := s.orderOf(1, no); o.str("status") != "pending_payment" {
		t.Fatalf("the order after bad webhooks: %v", o.body)
	}
	if w := s.succeeded("evt_amount", "pi_amount", no, 499); w.code != 200 {
		t.Fatalf("a wrong amount: %d %v", w.code, w.body)
	}
	if w := s.succeeded("evt_unknown", "pi_unknown", fmt.Sprintf("%d-06H0J68TSYHN2J2MDXSS60AGDR", act), 500); w.code != 200 {
		t.Fatalf("an unknown order: %d %v", w.code, w.body)
	}
	if o := s.orderOf(1, no); o.str("status") != "pending_payment" {
		t.Fatalf("the order after a wrong amount: %v", o.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM payments WHERE id = 'pi_amount' AND flag = 'mismatch'")
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM payments WHERE id = 'pi_unknown' AND flag = 'unknown_order'")
	s.waitMySQL(2, 30*time.Second, "SELECT COUNT(*) FROM refunds WHERE payment_id IN ('pi_amount', 'pi_unknown')")
	if p := s.pay(2, no); p.code != 404 {
		t.Errorf("someone else's order: %d %v; want 404", p.code, p.body)
	}
}

// Money that comes after the order's payment time ran out is given back,
// exactly once: the order is cancelled at pay_by (its payment cancelled at
// the provider too), a pay after it is refused 409, Stripe's confirmation
// arrives late and twice, and one refund is made; the money invariants
// hold.
func TestPayments_stripe_lateMoney_refundedExactlyOnce(t *testing.T) {
	waits(t)
	s := newStripeStack(t)
	act := s.sale(10, 2, 10) // 10 s to pay: the shortest allowed
	no := s.order(1, act, 1).str("order_no")
	if p := s.pay(1, no); p.code != 200 {
		t.Fatalf("pay: %d %v", p.code, p.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'cancelled'", no)
	if p := s.pay(1, no); p.code != 409 {
		t.Errorf("a pay after pay_by: %d %v; want 409", p.code, p.body)
	}
	pi := "pi_late_" + no
	for range 2 {
		if w := s.succeeded("evt_late", pi, no, 500); w.code != 200 {
			t.Fatalf("the late confirmation: %d %v", w.code, w.body)
		}
	}
	if w := s.succeeded("evt_late_again", pi, no, 500); w.code != 200 {
		t.Fatalf("the late confirmation, another event: %d %v", w.code, w.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM refunds WHERE payment_id = ?", pi)
	time.Sleep(time.Second)
	if n := s.count("SELECT COUNT(*) FROM refunds"); n != 1 {
		t.Fatalf("%d refunds, want exactly 1", n)
	}
	if o := s.orderOf(1, no); o.str("status") != "cancelled" {
		t.Fatalf("the order after late money: %v", o.body)
	}
	s.settledMoney(act)
}

// A failed group's paid member is refunded through the provider, once:
// the member paid (Stripe's webhook), the group's deadline passed
// unfilled, the settlement refunded the order, and the worker gave the
// money back.
func TestPayments_stripe_failedGroupsPaidMember_refundedThroughTheProvider(t *testing.T) {
	waits(t)
	s := newStripeStack(t)
	act := s.groupBuy(10, 2, 2, 10, 600) // 10 s to fill: the shortest allowed
	r := s.open(1, act)
	if r.code != 202 {
		t.Fatalf("open: %d %v", r.code, r.body)
	}
	no, gid := r.str("order_no"), r.str("group_id")
	if p := s.pay(1, no); p.code != 200 {
		t.Fatalf("pay: %d %v", p.code, p.body)
	}
	pi := "pi_group_" + no
	if w := s.succeeded("evt_group", pi, no, 300); w.code != 200 {
		t.Fatalf("webhook: %d %v", w.code, w.body)
	}
	if st := s.waitGroupDone(gid); st != "failed" {
		t.Fatalf("group %s: %s, want failed", gid, st)
	}
	if st := s.waitOrderSettled(member{1, no}, "failed"); st != "refunded" {
		t.Fatalf("the paid member's order: %s, want refunded", st)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM refunds WHERE payment_id = ? AND reason = 'group_failed'", pi)
	s.settledMoney(act)
}

// settledMoney waits until the sale's money invariants hold (the worker
// writes payments and refunds a moment after), or fails with them.
func (s *stack) settledMoney(act int64) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := invariants.Settled(context.Background(), s.rdb(), s.db, act)
		if err != nil {
			s.t.Fatal(err)
		}
		if rep.OK() {
			s.t.Logf("\n%s", rep)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("invariants broken:\n%s", rep)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
