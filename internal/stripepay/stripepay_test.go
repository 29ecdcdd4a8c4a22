package stripepay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/stripepay"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const webhookSecret = "whsec_test_0123456789abcdef"

func newProvider(t *testing.T) (*stripepay.Provider, *testenv.StripeRecorder) {
	t.Helper()
	rec := testenv.StartStripeMock(t).Recorder(t)
	return stripepay.New(stripepay.Config{SecretKey: "sk_test_123", WebhookSecret: webhookSecret, APIURL: rec.URL}), rec
}

// last is the last request rec passed on.
func last(t *testing.T, rec *testenv.StripeRecorder) testenv.StripeRequest {
	t.Helper()
	all := rec.Requests("")
	if len(all) == 0 {
		t.Fatal("no request reached stripe-mock")
	}
	return all[len(all)-1]
}

// Against stripe-mock, which validates every request against Stripe's API
// description: a PaymentIntent is created for the order's amount and
// currency with its number and sale in the metadata and the order's
// idempotency key; cancelled; refunded in whole with the payment's key;
// its refunds listed.
func TestProvider_createCancelRefund_requestsStripeAccepts_withTheOrdersKeys(t *testing.T) {
	p, rec := newProvider(t)
	ctx := context.Background()
	no := "42-06H0J68TSYHN2J2MDXSS60AGDR"
	in, err := p.Create(ctx, payment.Charge{OrderNo: no, ActivityID: 42, AmountCents: 99900, Currency: "cny",
		Description: "order " + no, Key: payment.ChargeKey(no)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if in.ID == "" || in.ClientSecret == "" {
		t.Fatalf("create answered %+v: want an id and a client secret", in)
	}
	q := last(t, rec)
	if q.Method+" "+q.Path != "POST /v1/payment_intents" || q.IdempotencyKey != payment.ChargeKey(no) || q.Status != 200 {
		t.Fatalf("create sent %s %s key %q (answered %d), want POST /v1/payment_intents key %q",
			q.Method, q.Path, q.IdempotencyKey, q.Status, payment.ChargeKey(no))
	}
	for field, want := range map[string]string{"amount": "99900", "currency": "cny", "metadata[order_no]": no,
		"metadata[activity_id]": "42", "metadata[created_by]": "flashsale", "description": "order " + no} {
		if got := q.Form.Get(field); got != want {
			t.Errorf("create sent %s=%q, want %q", field, got, want)
		}
	}
	if err := p.Cancel(ctx, in.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if q := last(t, rec); q.Method+" "+q.Path != "POST /v1/payment_intents/"+in.ID+"/cancel" {
		t.Fatalf("cancel sent %s %s", q.Method, q.Path)
	}
	id, err := p.Refund(ctx, in.ID, 99900, payment.RefundKey(in.ID))
	if err != nil || id == "" {
		t.Fatalf("refund: %q, %v", id, err)
	}
	q = last(t, rec)
	if q.Method+" "+q.Path != "POST /v1/refunds" || q.IdempotencyKey != payment.RefundKey(in.ID) ||
		q.Form.Get("payment_intent") != in.ID || q.Form.Get("amount") != "99900" {
		t.Fatalf("refund sent %s %s key %q payment_intent=%q amount=%q; want POST /v1/refunds key %q, %s, 99900",
			q.Method, q.Path, q.IdempotencyKey, q.Form.Get("payment_intent"), q.Form.Get("amount"), payment.RefundKey(in.ID), in.ID)
	}
	if _, err := p.Refunds(ctx, in.ID); err != nil {
		t.Fatalf("refunds: %v", err)
	}
	if q := last(t, rec); q.Method+" "+q.Path != "GET /v1/refunds" || q.Form.Get("payment_intent") != in.ID {
		t.Fatalf("refunds sent %s %s payment_intent=%q", q.Method, q.Path, q.Form.Get("payment_intent"))
	}
	if _, err := p.Payments(ctx, 42, time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("list: %v", err)
	}
}

// An event as Stripe sends it: a payment_intent.* event of the client's
// API version, its object the PaymentIntent.
func stripeEvent(t *testing.T, id, typ, pi, no string, amount int64) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "type": typ, "api_version": "2025-10-29.clover", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": pi, "object": "payment_intent", "amount": amount, "amount_received": amount, "currency": "cny",
			"status": "succeeded", "metadata": map[string]string{"order_no": no, "activity_id": "42"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signed(body []byte, secret string, at time.Time) http.Header {
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at})
	return http.Header{"Stripe-Signature": []string{sp.Header}}
}

// Webhooks signed with stripe-go's own test helper, Stripe's scheme: a
// good one reads as the domain's event; a bad signature, another secret's,
// an old timestamp or none are ErrBadSignature; a body that is no event is
// ErrBadEvent; an event the service does not act on reads as Other.
func TestProvider_parseEvent_verifiesTheSignatureAndReadsThePaymentIntent(t *testing.T) {
	p := stripepay.New(stripepay.Config{SecretKey: "sk_test_123", WebhookSecret: webhookSecret})
	body := stripeEvent(t, "evt_1", "payment_intent.succeeded", "pi_1", "42-06H0J68TSYHN2J2MDXSS60AGDR", 99900)
	ev, err := p.ParseEvent(body, signed(body, webhookSecret, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	want := payment.Event{ID: "evt_1", Kind: payment.PaymentSucceeded, PaymentID: "pi_1",
		OrderNo: "42-06H0J68TSYHN2J2MDXSS60AGDR", AmountCents: 99900, Currency: "cny"}
	ev.Created = time.Time{}
	if ev != want {
		t.Fatalf("event %+v, want %+v", ev, want)
	}
	for name, h := range map[string]http.Header{
		"another secret":    signed(body, "whsec_other", time.Now()),
		"an old timestamp":  signed(body, webhookSecret, time.Now().Add(-10*time.Minute)),
		"no signature":      {},
		"a garbage header":  {"Stripe-Signature": []string{"nonsense"}},
		"the body tampered": signed(append([]byte(nil), body[:len(body)-1]...), webhookSecret, time.Now()),
	} {
		if _, err := p.ParseEvent(body, h); !errors.Is(err, payment.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	junk := []byte(`{"object":"event","id":"evt_2","type":"payment_intent.succeeded","data":{"object":{"amount":"lots"}}}`)
	if _, err := p.ParseEvent(junk, signed(junk, webhookSecret, time.Now())); !errors.Is(err, payment.ErrBadEvent) {
		t.Errorf("a malformed PaymentIntent: %v, want ErrBadEvent", err)
	}
	other := stripeEvent(t, "evt_3", "customer.created", "pi_1", "", 0)
	if ev, err := p.ParseEvent(other, signed(other, webhookSecret, time.Now())); err != nil || ev.Kind != payment.Other {
		t.Errorf("another kind of event: %+v, %v; want Other", ev, err)
	}
}

// stripeEventMeta is stripeEvent with the PaymentIntent's metadata given.
func stripeEventMeta(t *testing.T, id, pi string, meta map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "type": "payment_intent.succeeded", "api_version": "2025-10-29.clover",
		"created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": pi, "object": "payment_intent", "amount": 500, "amount_received": 500, "currency": "cny",
			"status": "succeeded", "metadata": meta,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Only the PaymentIntents this service created are its own to act on: its
// tag in the metadata (created_by, STRIPE_METADATA_TAG), or — made before
// the tag — no tag and an order number of the service's form. A Checkout
// Session's or a Payment Link's PaymentIntent on the same account (no
// metadata of ours), another deployment's (another tag), and one naming
// an order number of another form are Foreign: ignored, never refunded.
func TestProvider_parseEvent_onlyPaymentsThisServiceCreatedAreOurs(t *testing.T) {
	p := stripepay.New(stripepay.Config{SecretKey: "sk_test_123", WebhookSecret: webhookSecret, Tag: "shop-eu"})
	no := "42-06H0J68TSYHN2J2MDXSS60AGDR"
	for _, c := range []struct {
		name    string
		meta    map[string]string
		foreign bool
	}{
		{"created by this deployment", map[string]string{"created_by": "shop-eu", "order_no": no, "activity_id": "42"}, false},
		{"created before the tag, an order of ours", map[string]string{"order_no": no, "activity_id": "42"}, false},
		{"a Checkout Session's", map[string]string{}, true},
		{"a Payment Link's, with metadata of its own", map[string]string{"campaign": "spring"}, true},
		{"another deployment's", map[string]string{"created_by": "shop-us", "order_no": no}, true},
		{"another app's order number", map[string]string{"order_no": "INV-2026-0042"}, true},
	} {
		body := stripeEventMeta(t, "evt_"+c.name, "pi_x", c.meta)
		ev, err := p.ParseEvent(body, signed(body, webhookSecret, time.Now()))
		if err != nil || ev.Foreign != c.foreign {
			t.Errorf("%s: foreign %v, %v; want %v", c.name, ev.Foreign, err, c.foreign)
		}
	}
}
