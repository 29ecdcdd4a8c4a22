// Package stripepay is the payment domain's Stripe adapter
// (payment.Provider), on the official client, github.com/stripe/stripe-go:
// an order's payment is a PaymentIntent (its amount and currency the
// order's, its metadata the order's number and activity), cancelled with
// the PaymentIntent, refunded with a Refund; webhooks are verified with
// the client's webhook package (HMAC-SHA256 of the timestamp and body,
// timestamp within Tolerance). Its tests run against stripe-mock, a real
// server that validates every request against Stripe's API description
// (internal/testenv starts it).
package stripepay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
)

// Config is how to reach Stripe. The zero value of a field gives the
// default in its comment.
type Config struct {
	// SecretKey is the API key (STRIPE_SECRET_KEY): "sk_live_…" or
	// "sk_test_…".
	SecretKey string
	// WebhookSecret verifies webhooks (STRIPE_WEBHOOK_SECRET, "whsec_…").
	WebhookSecret string
	// APIURL is where the API is (STRIPE_API_URL). Default Stripe's;
	// stripe-mock's address in tests.
	APIURL string
	// Tolerance is how old a webhook's timestamp may be. Default 5 min
	// (Stripe's own default: replayed old webhooks are refused).
	Tolerance time.Duration
	// HTTPClient sends the API calls. Default: one with a 10 s timeout.
	HTTPClient *http.Client
	// Tag marks the PaymentIntents this service creates, in their
	// metadata ("created_by"; STRIPE_METADATA_TAG). Default "flashsale".
	// Events of other PaymentIntents on the account (Checkout, Payment
	// Links, another app; another deployment of this service, when each
	// has its own tag) are not acted on: payment.Event.Foreign.
	Tag string
}

// tagKey is the metadata key of Config.Tag.
const tagKey = "created_by"

// Provider is Stripe as a payment.Provider.
type Provider struct {
	c   *stripe.Client
	cfg Config
}

var _ payment.Provider = (*Provider)(nil)

// New returns the provider.
func New(cfg Config) *Provider {
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = webhook.DefaultTolerance
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Tag == "" {
		cfg.Tag = "flashsale"
	}
	bc := &stripe.BackendConfig{HTTPClient: cfg.HTTPClient, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelError}}
	if cfg.APIURL != "" {
		bc.URL = stripe.String(cfg.APIURL)
	}
	return &Provider{c: stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc))), cfg: cfg}
}

// Name is "stripe": webhooks come to POST /webhooks/stripe.
func (p *Provider) Name() string { return "stripe" }

// Create creates the order's PaymentIntent, idempotently: Stripe answers a
// request repeating c.Key with the PaymentIntent the first one made (for 24
// hours; an order's payment time is shorter).
func (p *Provider) Create(ctx context.Context, c payment.Charge) (payment.Intent, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount:                  stripe.Int64(c.AmountCents),
		Currency:                stripe.String(c.Currency),
		Description:             stripe.String(c.Description),
		AutomaticPaymentMethods: &stripe.PaymentIntentCreateAutomaticPaymentMethodsParams{Enabled: stripe.Bool(true)},
	}
	params.AddMetadata(tagKey, p.cfg.Tag)
	params.AddMetadata("order_no", c.OrderNo)
	params.AddMetadata("activity_id", strconv.FormatInt(c.ActivityID, 10))
	params.SetIdempotencyKey(c.Key)
	pi, err := p.c.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		return payment.Intent{}, err
	}
	return intentOf(pi), nil
}

// Cancel cancels a PaymentIntent not yet paid; a paid one is
// payment.ErrNotCancelable.
func (p *Provider) Cancel(ctx context.Context, id string) error {
	_, err := p.c.V1PaymentIntents.Cancel(ctx, id, &stripe.PaymentIntentCancelParams{})
	var se *stripe.Error
	if errors.As(err, &se) && se.Code == stripe.ErrorCodePaymentIntentUnexpectedState {
		return payment.ErrNotCancelable
	}
	return err
}

// Refund refunds the whole of PaymentIntent paymentID, once per key.
// Stripe keeps an idempotency key for 24 hours; a retry after that (a
// refund task retried for a day while the worker's MySQL was down) of a
// PaymentIntent refunded already is refused charge_already_refunded, and
// is answered here with the refund that stands: the money is back.
func (p *Provider) Refund(ctx context.Context, paymentID string, amountCents int64, key string) (string, error) {
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(paymentID), Amount: stripe.Int64(amountCents)}
	params.AddMetadata("reason", "flashsale: money that pays no order, or a failed group's")
	params.SetIdempotencyKey(key)
	r, err := p.c.V1Refunds.Create(ctx, params)
	var se *stripe.Error
	if errors.As(err, &se) && se.Code == stripe.ErrorCodeChargeAlreadyRefunded {
		made, lerr := p.Refunds(ctx, paymentID)
		if lerr != nil || len(made) == 0 {
			return "", errors.Join(err, lerr)
		}
		return made[len(made)-1], nil
	}
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

// Refunds returns the ids of PaymentIntent paymentID's refunds that stand
// (not failed or canceled), oldest first: one, when each was asked with
// the payment's key. The invariants checker counts them.
func (p *Provider) Refunds(ctx context.Context, paymentID string) ([]string, error) {
	params := &stripe.RefundListParams{PaymentIntent: stripe.String(paymentID)}
	var out []string
	for r, err := range p.c.V1Refunds.List(ctx, params) {
		if err != nil {
			return nil, err
		}
		if r.Status != stripe.RefundStatusFailed && r.Status != stripe.RefundStatusCanceled {
			out = append(out, r.ID)
		}
	}
	// Stripe lists the newest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// ParseEvent verifies a webhook with the Stripe-Signature header and reads
// the PaymentIntent events the service acts on. The event's API version
// is not held to the client's: the fields read (the PaymentIntent's id,
// amount, currency, metadata) are the same in every version.
func (p *Provider) ParseEvent(payload []byte, header http.Header) (payment.Event, error) {
	e, err := webhook.ConstructEventWithOptions(payload, header.Get("Stripe-Signature"), p.cfg.WebhookSecret,
		webhook.ConstructEventOptions{Tolerance: p.cfg.Tolerance, IgnoreAPIVersionMismatch: true})
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader),
		errors.Is(err, webhook.ErrNoValidSignature), errors.Is(err, webhook.ErrTooOld):
		return payment.Event{}, fmt.Errorf("%w: %w", payment.ErrBadSignature, err)
	case err != nil:
		return payment.Event{}, fmt.Errorf("%w: %w", payment.ErrBadEvent, err)
	case e.ID == "":
		return payment.Event{}, fmt.Errorf("%w: no event id", payment.ErrBadEvent)
	}
	ev := payment.Event{ID: e.ID, Kind: payment.Other, Created: time.Unix(e.Created, 0).UTC()}
	switch e.Type {
	case "payment_intent.succeeded":
		ev.Kind = payment.PaymentSucceeded
	case "payment_intent.payment_failed":
		ev.Kind = payment.PaymentFailed
	case "payment_intent.canceled":
		ev.Kind = payment.PaymentCanceled
	default:
		return ev, nil
	}
	if e.Data == nil {
		return payment.Event{}, fmt.Errorf("%w: %s without data", payment.ErrBadEvent, e.Type)
	}
	var pi stripe.PaymentIntent
	if err := json.Unmarshal(e.Data.Raw, &pi); err != nil || pi.ID == "" {
		return payment.Event{}, fmt.Errorf("%w: %s: not a PaymentIntent", payment.ErrBadEvent, e.Type)
	}
	in := intentOf(&pi)
	ev.PaymentID, ev.OrderNo, ev.Currency = in.ID, in.OrderNo, in.Currency
	ev.Foreign = !p.ours(&pi)
	ev.AmountCents = pi.AmountReceived
	if ev.Kind != payment.PaymentSucceeded || ev.AmountCents == 0 {
		ev.AmountCents = pi.Amount
	}
	return ev, nil
}

// Payments lists the PaymentIntents created since since whose metadata
// names activityID.
func (p *Provider) Payments(ctx context.Context, activityID int64, since time.Time) ([]payment.Intent, error) {
	params := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	want := strconv.FormatInt(activityID, 10)
	var out []payment.Intent
	for pi, err := range p.c.V1PaymentIntents.List(ctx, params) {
		if err != nil {
			return nil, err
		}
		if pi.Metadata["activity_id"] == want && p.ours(pi) {
			out = append(out, intentOf(pi))
		}
	}
	return out, nil
}

// ours reports whether this service created pi: its metadata carries
// Config.Tag — or, for a PaymentIntent created before the tag was set
// (2026-11-28: its late money may still come), no tag at all and an order
// number of this service's form.
func (p *Provider) ours(pi *stripe.PaymentIntent) bool {
	if tag, ok := pi.Metadata[tagKey]; ok {
		return tag == p.cfg.Tag
	}
	_, err := order.ParseNo(pi.Metadata["order_no"])
	return err == nil
}

// intentOf is a PaymentIntent as the payment domain sees it.
func intentOf(pi *stripe.PaymentIntent) payment.Intent {
	return payment.Intent{
		ID: pi.ID, ClientSecret: pi.ClientSecret, AmountCents: pi.Amount, Currency: string(pi.Currency),
		Status: statusOf(pi.Status), OrderNo: pi.Metadata["order_no"],
	}
}

// statusOf maps Stripe's PaymentIntent statuses onto the domain's.
func statusOf(s stripe.PaymentIntentStatus) payment.Status {
	switch s {
	case stripe.PaymentIntentStatusSucceeded:
		return payment.Succeeded
	case stripe.PaymentIntentStatusCanceled:
		return payment.Canceled
	}
	return payment.Pending
}
