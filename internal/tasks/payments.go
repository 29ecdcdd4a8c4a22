package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/payment"
)

// Payment task types (payment.Tasks): a payment's record in MySQL, and a
// refund through the provider.
const (
	TypePaymentRecord = "payment:record"
	TypePaymentRefund = "payment:refund"
)

// refundKept is how long a refund task stays after it ran, so that a
// second one for the same payment (a webhook replayed, the worker's sync of
// a refunded order) is refused by its TaskID meanwhile. The provider's
// idempotency key (payment.RefundKey) covers the rest: a refund task that
// runs twice refunds once.
const refundKept = 7 * 24 * time.Hour

// PaymentQueue queues payment tasks on asynq, durably (payment.Tasks).
type PaymentQueue struct{ c *asynq.Client }

var _ payment.Tasks = (*PaymentQueue)(nil)

// NewPaymentQueue returns a PaymentQueue on c.
func NewPaymentQueue(c *asynq.Client) *PaymentQueue { return &PaymentQueue{c: c} }

// paymentPayload is a payment in a task: as it was when queued.
type paymentPayload struct {
	Payment payment.Payment `json:"payment"`
}

// RecordPayment queues the writing of p, as it is now, into MySQL. Each
// change queues one; the write only moves a payment forward, so their
// order does not matter.
func (q *PaymentQueue) RecordPayment(ctx context.Context, p payment.Payment) error {
	return q.enqueue(ctx, TypePaymentRecord, p)
}

// QueueRefund queues p's refund: one task per payment (its TaskID).
func (q *PaymentQueue) QueueRefund(ctx context.Context, p payment.Payment) error {
	return q.enqueue(ctx, TypePaymentRefund, p, asynq.TaskID("refund:"+p.ID), asynq.Retention(refundKept))
}

func (q *PaymentQueue) enqueue(ctx context.Context, typ string, p payment.Payment, opts ...asynq.Option) error {
	payload, err := json.Marshal(paymentPayload{Payment: p})
	if err != nil {
		return err
	}
	opts = append(opts, asynq.Queue(QueueName), asynq.MaxRetry(maxRetry))
	_, err = q.c.EnqueueContext(ctx, asynq.NewTask(typ, payload), opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // queued already
	}
	if err != nil {
		return fmt.Errorf("%w: enqueue %s: %w", payment.ErrUnavailable, typ, err)
	}
	return nil
}

// PaymentWorker runs the payment tasks.
type PaymentWorker struct {
	svc *payment.Service
	rec payment.Records
	log *slog.Logger
}

// NewPaymentWorker returns the payment tasks' handlers: refunds go through
// svc's provider, records into rec.
func NewPaymentWorker(svc *payment.Service, rec payment.Records, log *slog.Logger) *PaymentWorker {
	return &PaymentWorker{svc: svc, rec: rec, log: log}
}

// Register adds the handlers to mux.
func (w *PaymentWorker) Register(mux *asynq.ServeMux) {
	mux.HandleFunc(TypePaymentRecord, w.HandleRecord)
	mux.HandleFunc(TypePaymentRefund, w.HandleRefund)
}

func paymentOf(t *asynq.Task) (payment.Payment, error) {
	var p paymentPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Payment.ID == "" {
		return payment.Payment{}, fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	return p.Payment, nil
}

// HandleRecord writes a payment into MySQL.
func (w *PaymentWorker) HandleRecord(ctx context.Context, t *asynq.Task) error {
	p, err := paymentOf(t)
	if err != nil {
		return err
	}
	return w.rec.WritePayment(ctx, p)
}

// HandleRefund refunds a payment through the provider (once per payment:
// its idempotency key), then records the refund. A worker killed between
// the two runs the task again: the provider answers the same refund, and
// the record is written then.
func (w *PaymentWorker) HandleRefund(ctx context.Context, t *asynq.Task) error {
	p, err := paymentOf(t)
	if err != nil {
		return err
	}
	p, err = w.svc.Refund(ctx, p)
	if err != nil {
		return err
	}
	w.log.Info("payment refunded", "payment", p.ID, "order", p.OrderNo, "refund", p.RefundID, "flag", p.Flag)
	return w.rec.WritePayment(ctx, p)
}
