package payment

import (
	"context"
	"net/http"
	"time"

	"github.com/flashsale/flashsale/internal/order"
)

// What the Service needs from the outside, declared here: a Provider
// (internal/stripepay on the official Stripe client, internal/paysim for
// the demo and the load tests), the order domain (Orders: *order.Service),
// the payments' live records (Store: internal/redisstore), and the durable
// work (Tasks: internal/tasks). docs/payments.md says what an Alipay or
// WeChat Pay adapter would implement.

// Provider is a payment service.
type Provider interface {
	// Name is the provider's name in records, metrics and webhook routes
	// ("stripe": POST /webhooks/stripe).
	Name() string
	// Create starts the payment of c, or returns the one c.Key started
	// before (the provider's idempotency), with what the shopper's app
	// confirms it with. The payment carries c.OrderNo in its metadata.
	Create(ctx context.Context, c Charge) (Intent, error)
	// Cancel cancels payment id so that it cannot be paid any more. A
	// payment already paid is not cancelled: ErrNotCancelable, and its
	// money comes as a late payment, which is refunded.
	Cancel(ctx context.Context, id string) error
	// Refund gives back the whole of payment paymentID, once per key: the
	// same key answers the refund the first request made. It returns the
	// refund's id.
	Refund(ctx context.Context, paymentID string, amountCents int64, key string) (string, error)
	// ParseEvent verifies a webhook (its signature, its timestamp within
	// the provider's tolerance) and reads its event: ErrBadSignature,
	// ErrBadEvent.
	ParseEvent(payload []byte, header http.Header) (Event, error)
	// Payments lists the provider's payments of activity activityID
	// created since since, for the reconciliation of a sale.
	Payments(ctx context.Context, activityID int64, since time.Time) ([]Intent, error)
}

// ErrNotCancelable is Provider.Cancel's answer for a payment that was paid.
var ErrNotCancelable = errorString("payment: not cancelable: paid already")

type errorString string

func (e errorString) Error() string { return string(e) }

// Orders is the order domain as payments need it (*order.Service).
type Orders interface {
	// Get returns order no if it belongs to userID (0: whoever's).
	Get(ctx context.Context, no string, userID int64) (order.Order, error)
	// GetAcked is Get read with the replicas' acknowledgement: what an
	// answer tells the shopper.
	GetAcked(ctx context.Context, no string, userID int64) (order.Order, error)
	// Pay marks order o (as Get read it from Redis) paid by payment
	// paymentID: the provider confirmed the money. Refusals: the order's
	// (ErrConflict: not pending payment, its payment time over;
	// ErrGroupClosed; ErrNotFound: Redis no longer keeps it).
	Pay(ctx context.Context, o order.Order, paymentID string) (order.Order, error)
}

// Store keeps the live record of orders' payments (Redis, beside the
// orders) and the webhook events already handled.
type Store interface {
	// Payment returns order no's payment; ErrNotFound when it has none.
	Payment(ctx context.Context, no string) (Payment, error)
	// SavePayment records p as order p.OrderNo's payment, atomically
	// merged with what is recorded: a payment of another id recorded
	// first stays and is returned (one payment per order) — unless p paid
	// the order (succeeded, unflagged) and the recorded one did not; for the same
	// id, the status moves only forward (pending, then failed or
	// canceled, succeeded last: the money, once come, stands), a flag, a
	// refund id and a client secret, once set, stay. It returns the
	// record as it is after.
	SavePayment(ctx context.Context, p Payment) (Payment, error)
	// EventSeen reports whether event id of provider was handled; MarkSeen
	// says it was (kept for a week: providers retry for three days).
	EventSeen(ctx context.Context, provider, id string) (bool, error)
	MarkSeen(ctx context.Context, provider, id string) error
}

// Tasks is the durable work payments set off (asynq): a payment's record
// in MySQL, and a refund, each retried until done.
type Tasks interface {
	// RecordPayment writes p, as it is now, into MySQL.
	RecordPayment(ctx context.Context, p Payment) error
	// QueueRefund gives payment p's money back through the provider: one
	// task per payment, and the provider's idempotency key (RefundKey)
	// makes a task run twice refund once.
	QueueRefund(ctx context.Context, p Payment) error
}

// Records is the record of payments in MySQL, written by the worker
// (mysqlstore.Payments).
type Records interface {
	WritePayment(ctx context.Context, p Payment) error
}

// RecordReader reads the record of payments (mysqlstore.Payments), for the
// admin's views.
type RecordReader interface {
	// OfOrder is an order's payments, oldest first.
	OfOrder(ctx context.Context, no string) ([]Payment, error)
	// OfActivity is an activity's payments, oldest first.
	OfActivity(ctx context.Context, activityID int64) ([]Payment, error)
}
