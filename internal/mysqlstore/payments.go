package mysqlstore

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/webhook"
)

// Payments is the record of payments and refunds in MySQL (migrations/00006).
type Payments struct{ db *gorm.DB }

// NewPayments returns the payments repository.
func NewPayments(db *gorm.DB) *Payments { return &Payments{db: db} }

var _ payment.Records = (*Payments)(nil)

// WritePayment upserts p by its id, as it is now: the status only moves
// forward (pending, failed, canceled, succeeded — a later write of an
// earlier status changes nothing), a flag once set stays; and, when p has
// its refund, the refund's row, once per payment (refunds_payment is
// unique: a second refund of one payment is refused by the table itself).
// The write that first records a flag appends payment.flagged to the
// webhooks' outbox in the same transaction (docs/webhooks.md).
func (r *Payments) WritePayment(ctx context.Context, p payment.Payment) error {
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A flagged write reads the flag before it under the row's lock: the
		// write that sets it appends payment.flagged with it, and no other
		// does. Only a flagged one: such money is rare, and two writes of a
		// new payment at once that both lock its gap can deadlock (the
		// loser's task is retried), which the payments' usual writes should
		// not risk for this.
		var before []string
		if p.Flag != "" {
			if err := tx.Raw("SELECT flag FROM payments WHERE id = ? FOR UPDATE", p.ID).Scan(&before).Error; err != nil {
				return fmt.Errorf("payment %s: %w", p.ID, err)
			}
		}
		err := tx.Exec("INSERT INTO payments (id, provider, order_no, activity_id, amount_cents, currency, status, flag, created_at, updated_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE "+
			"status = IF(FIELD(VALUES(status), 'pending', 'failed', 'canceled', 'succeeded') > FIELD(status, 'pending', 'failed', 'canceled', 'succeeded'), VALUES(status), status), "+
			"flag = IF(flag = '', VALUES(flag), flag), "+
			"updated_at = GREATEST(updated_at, VALUES(updated_at))",
			p.ID, p.Provider, p.OrderNo, p.ActivityID, p.AmountCents, p.Currency, string(p.Status), string(p.Flag),
			timeOr(p.CreatedAt), timeOr(p.UpdatedAt)).Error
		if err != nil {
			return fmt.Errorf("payment %s: %w", p.ID, err)
		}
		if p.RefundID != "" {
			reason := string(p.Flag)
			if reason == "" {
				reason = "group_failed"
			}
			err = tx.Exec("INSERT INTO refunds (refund_id, payment_id, order_no, amount_cents, currency, reason, created_at) "+
				"VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE refund_id = refund_id",
				p.RefundID, p.ID, p.OrderNo, p.AmountCents, p.Currency, reason, timeOr(p.UpdatedAt)).Error
			if err != nil {
				return fmt.Errorf("refund of %s: %w", p.ID, err)
			}
		}
		// The event last: AppendTx holds the outbox's clock to the commit.
		if p.Flag != "" && (len(before) == 0 || before[0] == "") {
			if err := AppendTx(tx, webhook.PaymentFlaggedEvent(p, timeOr(p.UpdatedAt))); err != nil {
				return fmt.Errorf("payment %s's event: %w", p.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return paymentsUnavailable("write", err) // the transaction's begin and commit too
	}
	return nil
}

// paymentsUnavailable is a failure of MySQL under the payments' record:
// a payment.ErrUnavailable, as the payment service expects of its stores,
// that is this package's ErrUnavailable too, so whoever answers it can
// tell it was MySQL's (the API's 503 names the dependency).
func paymentsUnavailable(what string, err error) error {
	return fmt.Errorf("%w (%w): %s: %w", payment.ErrUnavailable, ErrUnavailable, what, err)
}

// PaymentRow is a row of the payments table, with its refund if any.
type PaymentRow struct {
	ID          string    `gorm:"column:id"`
	Provider    string    `gorm:"column:provider"`
	OrderNo     string    `gorm:"column:order_no"`
	ActivityID  int64     `gorm:"column:activity_id"`
	AmountCents int64     `gorm:"column:amount_cents"`
	Currency    string    `gorm:"column:currency"`
	Status      string    `gorm:"column:status"`
	Flag        string    `gorm:"column:flag"`
	RefundID    *string   `gorm:"column:refund_id"`
	CreatedAt   time.Time `gorm:"column:created_at"`
	UpdatedAt   time.Time `gorm:"column:updated_at"`
}

func (r PaymentRow) toPayment() payment.Payment {
	p := payment.Payment{
		ID: r.ID, Provider: r.Provider, OrderNo: r.OrderNo, ActivityID: r.ActivityID, AmountCents: r.AmountCents,
		Currency: r.Currency, Status: payment.Status(r.Status), Flag: payment.Flag(r.Flag),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.RefundID != nil {
		p.RefundID = *r.RefundID
	}
	return p
}

const paymentSelect = "SELECT p.id, p.provider, p.order_no, p.activity_id, p.amount_cents, p.currency, p.status, p.flag, " +
	"r.refund_id AS refund_id, p.created_at, p.updated_at FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id "

// OfOrder returns order no's payments, oldest first (one, but for
// duplicates).
func (r *Payments) OfOrder(ctx context.Context, no string) ([]payment.Payment, error) {
	return r.query(ctx, paymentSelect+"WHERE p.order_no = ? ORDER BY p.created_at, p.id", no)
}

// OfActivity returns activity id's payments, oldest first (activity 0: the
// payments that named no order we know).
func (r *Payments) OfActivity(ctx context.Context, id int64) ([]payment.Payment, error) {
	return r.query(ctx, paymentSelect+"WHERE p.activity_id = ? ORDER BY p.created_at, p.id", id)
}

func (r *Payments) query(ctx context.Context, q string, args ...any) ([]payment.Payment, error) {
	var rows []PaymentRow
	if err := r.db.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, paymentsUnavailable("payments", err)
	}
	out := make([]payment.Payment, len(rows))
	for i, row := range rows {
		out[i] = row.toPayment()
	}
	return out, nil
}

// timeOr is t, or now when t is zero (a record without its time).
func timeOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t.UTC()
}
