// Package payment is the money of an order: one payment per order at a
// payment provider (Stripe; a simulated one for the demo and the load
// tests), its amount and currency taken from the order and never from the
// client. An order becomes paid only when the provider confirms its
// payment, in a signed webhook; money that arrives for an order that can no
// longer be paid (cancelled, expired, its group failed, paid already) is
// given back through the provider, once.
//
// Like internal/order it imports no adapter: it declares what it needs
// (ports.go) — the Provider (internal/stripepay, internal/paysim), the
// payments' live records (internal/redisstore), the durable tasks
// (internal/tasks) — and docs/payments.md says how a provider plugs in.
package payment

import (
	"errors"
	"time"
)

// Status is where a provider payment is.
type Status string

// The statuses, as the provider reports them: created and waiting for the
// shopper (pending), confirmed (succeeded: the money is ours), refused by
// the shopper's bank (failed: the shopper may try again, the same payment),
// or cancelled before it was paid (canceled).
const (
	Pending   Status = "pending"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Canceled  Status = "canceled"
)

// Flag says why a confirmed payment did not pay its order. Such money is
// given back (Refund), and the admin's reconciliation lists it.
type Flag string

// The flags.
const (
	// Late: the order could no longer be paid when the money came (it was
	// cancelled by the shopper, its payment time ran out, its group
	// failed or closed).
	Late Flag = "late"
	// Mismatch: the amount or the currency is not the order's.
	Mismatch Flag = "mismatch"
	// UnknownOrder: the payment names no order this service knows.
	UnknownOrder Flag = "unknown_order"
	// Duplicate: the order was paid by another payment.
	Duplicate Flag = "duplicate"
)

// Payment is one provider payment of one order, as this service records it.
type Payment struct {
	ID           string // the provider's ("pi_…")
	Provider     string // "stripe", "simulated"
	OrderNo      string
	ActivityID   int64
	AmountCents  int64
	Currency     string // ISO 4217, lower case ("cny")
	Status       Status
	ClientSecret string // what the shopper's app confirms the payment with
	Flag         Flag   // why a confirmed payment did not pay its order; "" when it did, or is not confirmed
	RefundID     string // the provider's refund, once made
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Refunded reports whether the payment's money was given back.
func (p Payment) Refunded() bool { return p.RefundID != "" }

// Charge is what a provider is asked to collect for one order.
type Charge struct {
	OrderNo     string
	ActivityID  int64
	AmountCents int64
	Currency    string
	Description string
	// Key makes the request idempotent at the provider: the same key
	// answers the payment the first request made (ChargeKey).
	Key string
}

// ChargeKey is the provider idempotency key of order no's payment: one
// payment per order, whichever api asks, however often.
func ChargeKey(no string) string { return "flashsale-pay-" + no }

// RefundKey is the provider idempotency key of the refund of payment id:
// a payment is refunded once, whatever retries, replayed webhooks or
// killed workers send.
func RefundKey(paymentID string) string { return "flashsale-refund-" + paymentID }

// Intent is a provider payment as the provider answers it.
type Intent struct {
	ID           string
	ClientSecret string
	AmountCents  int64
	Currency     string
	Status       Status
	OrderNo      string // from the payment's metadata
}

// EventKind is what a provider's event says happened.
type EventKind string

// The kinds of events the service acts on; the rest are acknowledged and
// ignored (Other).
const (
	PaymentSucceeded EventKind = "payment_succeeded"
	PaymentFailed    EventKind = "payment_failed"
	PaymentCanceled  EventKind = "payment_canceled"
	Other            EventKind = "other"
)

// Event is a provider's webhook event, its signature verified.
type Event struct {
	ID          string // the provider's, unique: an event delivered twice is handled once
	Kind        EventKind
	PaymentID   string
	OrderNo     string // from the payment's metadata; "" when it names none
	AmountCents int64  // what the provider collected (PaymentSucceeded)
	Currency    string
	Created     time.Time
	// Foreign: the payment was not created by this service (its
	// metadata is not ours: Stripe Checkout, a Payment Link, another app
	// on the same account). Its events are ignored and counted: that
	// money is the shop's other business, not ours to give back.
	Foreign bool
}

// Errors. Check them with errors.Is.
var (
	// ErrBadSignature: a webhook whose signature does not verify, whose
	// timestamp is outside the tolerance, or that is not the provider's
	// form. Nothing is done.
	ErrBadSignature = errors.New("payment: webhook signature or timestamp invalid")
	// ErrBadEvent: a verified webhook whose body is not an event.
	ErrBadEvent = errors.New("payment: malformed event")
	// ErrNotPayable: the order cannot be paid now (not pending payment,
	// its payment time over, its group closed).
	ErrNotPayable = errors.New("payment: order not payable")
	// ErrProvider wraps a failure of the provider (network, its refusal).
	ErrProvider = errors.New("payment: provider unavailable")
	// ErrNotFound: no payment for that order.
	ErrNotFound = errors.New("payment: not found")
	// ErrUnavailable wraps a failure of this service's own stores.
	ErrUnavailable = errors.New("payment: unavailable")
)
