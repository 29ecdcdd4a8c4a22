package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/order"
)

// OrderRow is a row of the orders table (migrations/00003).
type OrderRow struct {
	ID          uint64     `gorm:"column:id;primaryKey;autoIncrement"`
	OrderNo     string     `gorm:"column:order_no"`
	ActivityID  uint64     `gorm:"column:activity_id"`
	UserID      uint64     `gorm:"column:user_id"`
	Quantity    int        `gorm:"column:quantity"`
	PriceCents  int64      `gorm:"column:price_cents"`
	AmountCents int64      `gorm:"column:amount_cents"`
	Status      string     `gorm:"column:status"`
	Fence       int64      `gorm:"column:fence"`
	CreatedAt   time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	PaidAt      *time.Time `gorm:"column:paid_at"`
	CancelledAt *time.Time `gorm:"column:cancelled_at"`
	UpdatedAt   time.Time  `gorm:"column:updated_at;autoUpdateTime:false"`
	GroupID     *string    `gorm:"column:group_id"`
}

// TableName is the table's name.
func (OrderRow) TableName() string { return "orders" }

func (r OrderRow) toOrder() order.Order {
	o := order.Order{
		No: r.OrderNo, ActivityID: int64(r.ActivityID), UserID: int64(r.UserID), Quantity: r.Quantity,
		PriceCents: r.PriceCents, AmountCents: r.AmountCents, Status: order.Status(r.Status), Fence: r.Fence,
		CreatedAt: r.CreatedAt.UTC(), Persisted: true,
	}
	if r.PaidAt != nil {
		o.PaidAt = r.PaidAt.UTC()
	}
	if r.CancelledAt != nil {
		o.CancelledAt = r.CancelledAt.UTC()
	}
	if r.GroupID != nil {
		o.GroupID = *r.GroupID
	}
	return o
}

// Orders is the orders repository. Its writes go through a batch.Loop:
// concurrent writers share one multi-row statement. Close it to stop that.
type Orders struct {
	db     *gorm.DB
	writes *batch.Loop[*orderWrite]
}

// NewOrders returns the repository over db.
func NewOrders(db *gorm.DB) *Orders {
	s := &Orders{db: db}
	s.writes = batch.New(func(ctx context.Context, b []*orderWrite) ([]*orderWrite, error) {
		err := s.writeBatch(ctx, b)
		for _, w := range b {
			w.err = err
			close(w.done)
		}
		return nil, nil // the writers retry (the worker's task, with backoff)
	}, batch.Options{Max: maxWriteBatch})
	return s
}

// ErrClosed answers writes after Close, and those Close could not send.
var ErrClosed = errors.New("mysqlstore: closed")

// Close writes what is waiting (for up to 5s) and stops the batching.
func (s *Orders) Close() {
	for _, w := range s.writes.Close() {
		w.err = ErrClosed
		close(w.done)
	}
}

// upsert is the statement Write runs, for n rows. An order is inserted once
// (order_no is unique); a row already there takes the new status only with
// a larger fence (the change's per-order lock token), so a stale or
// repeated change never moves a status backwards. fence is assigned last:
// MySQL evaluates the assignments left to right and the others compare
// against the old value.
func upsert(n int) string {
	row := "(?,?,?,?,?,?,?,?,?,?,?,?,?)"
	return `INSERT INTO orders (order_no, activity_id, user_id, quantity, price_cents, amount_cents, status, fence,
    created_at, paid_at, cancelled_at, updated_at, group_id) VALUES ` + strings.TrimSuffix(strings.Repeat(row+",", n), ",") + `
ON DUPLICATE KEY UPDATE
    status       = IF(VALUES(fence) > fence, VALUES(status), status),
    paid_at      = IF(VALUES(fence) > fence, VALUES(paid_at), paid_at),
    cancelled_at = IF(VALUES(fence) > fence, VALUES(cancelled_at), cancelled_at),
    updated_at   = IF(VALUES(fence) > fence, VALUES(updated_at), updated_at),
    fence        = GREATEST(fence, VALUES(fence))`
}

func nullable(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// orderWrite is one caller's order waiting for the next batch.
type orderWrite struct {
	o    order.Order
	err  error
	done chan struct{}
}

// maxWriteBatch bounds one statement (13 placeholders a row, well under
// MySQL's 65,535).
const maxWriteBatch = 500

// Write records o's current state, together with whatever other callers are
// writing at the moment: one multi-row statement per batch. It returns when
// o's batch committed (or failed). Idempotent: see upsert.
func (s *Orders) Write(ctx context.Context, o order.Order) error {
	return s.WriteMany(ctx, []order.Order{o})
}

// WriteMany is Write for many orders: they join the next batches together
// (maxWriteBatch rows a statement). It returns when all were written, or
// with the first error.
func (s *Orders) WriteMany(ctx context.Context, os []order.Order) error {
	ws := make([]*orderWrite, len(os))
	for i, o := range os {
		ws[i] = &orderWrite{o: o, done: make(chan struct{})}
	}
	if !s.writes.Add(ws...) {
		return ErrClosed
	}
	for _, w := range ws {
		select {
		case <-w.done:
			if w.err != nil {
				return w.err
			}
		case <-ctx.Done():
			return ctx.Err() // the writes may still land; they are idempotent
		}
	}
	return nil
}

// writeBatch writes one batch in one statement; ctx ends when Close's drain
// time is over.
func (s *Orders) writeBatch(ctx context.Context, batch []*orderWrite) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	args := make([]any, 0, 13*len(batch))
	for _, w := range batch {
		o := w.o
		var group *string
		if o.GroupID != "" {
			group = &o.GroupID
		}
		args = append(args, o.No, o.ActivityID, o.UserID, o.Quantity, o.PriceCents, o.AmountCents, string(o.Status),
			o.Fence, o.CreatedAt.UTC(), nullable(o.PaidAt), nullable(o.CancelledAt), now, group)
	}
	if err := s.db.WithContext(ctx).Exec(upsert(len(batch)), args...).Error; err != nil {
		return fmt.Errorf("%w: write %d orders: %w", ErrUnavailable, len(batch), err)
	}
	return nil
}

// Get returns order no from MySQL, or order.ErrNotFound.
func (s *Orders) Get(ctx context.Context, no string) (order.Order, error) {
	var rows []OrderRow
	if err := s.db.WithContext(ctx).Where("order_no = ?", no).Limit(1).Find(&rows).Error; err != nil {
		return order.Order{}, fmt.Errorf("%w: get order: %w", ErrUnavailable, err)
	}
	if len(rows) == 0 {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	return rows[0].toOrder(), nil
}

// PendingBefore returns up to limit of activityID's orders recorded as
// pending payment and created before before, oldest first: those whose
// payment time may have run out without their timeout running
// (tasks.Reconciler sweeps them).
func (s *Orders) PendingBefore(ctx context.Context, activityID int64, before time.Time, limit int) ([]string, error) {
	var nos []string
	err := s.db.WithContext(ctx).Model(&OrderRow{}).
		Where("activity_id = ? AND status = ? AND created_at < ?", activityID, string(order.PendingPayment), before.UTC()).
		Order("created_at").Limit(limit).Pluck("order_no", &nos).Error
	if err != nil {
		return nil, fmt.Errorf("%w: list pending orders: %w", ErrUnavailable, err)
	}
	return nos, nil
}

// ListByUser returns page (from 1) of pageSize of userID's recorded orders,
// newest first, and how many there are.
func (s *Orders) ListByUser(ctx context.Context, userID int64, page, pageSize int) ([]order.Order, int64, error) {
	tx := s.db.WithContext(ctx).Model(&OrderRow{}).Where("user_id = ?", userID)
	var total int64
	if err := tx.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("%w: count orders: %w", ErrUnavailable, err)
	}
	var rows []OrderRow
	if err := tx.Order("id DESC").Limit(pageSize).Offset((page - 1) * pageSize).Find(&rows).Error; err != nil {
		return nil, 0, fmt.Errorf("%w: list orders: %w", ErrUnavailable, err)
	}
	out := make([]order.Order, len(rows))
	for i, r := range rows {
		out[i] = r.toOrder()
	}
	return out, total, nil
}

// GroupRow is a row of the groups table (migrations/00004).
type GroupRow struct {
	ID           uint64    `gorm:"column:id;primaryKey;autoIncrement"`
	GroupID      string    `gorm:"column:group_id"`
	ActivityID   uint64    `gorm:"column:activity_id"`
	LeaderUserID uint64    `gorm:"column:leader_user_id"`
	Size         int       `gorm:"column:size"`
	Status       string    `gorm:"column:status"`
	Paid         int       `gorm:"column:paid"`
	CreatedAt    time.Time `gorm:"column:created_at;autoCreateTime:false"`
	ExpiresAt    time.Time `gorm:"column:expires_at"`
	UpdatedAt    time.Time `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName is the table's name.
func (GroupRow) TableName() string { return "groups" }

// WriteGroup records g's current state. A group's status only moves
// forward (forming before succeeded or failed) and its paid count only up,
// so a late sync task with an older picture never undoes a newer one. (The
// assignments run left to right: paid and updated_at still see the old
// status.)
func (s *Orders) WriteGroup(ctx context.Context, g order.Group) error {
	err := s.db.WithContext(ctx).Exec("INSERT INTO `groups` (group_id, activity_id, leader_user_id, size, status, paid, "+
		"created_at, expires_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?) ON DUPLICATE KEY UPDATE "+
		"paid = IF(status = 'forming', GREATEST(paid, VALUES(paid)), paid), "+
		"updated_at = IF(status = 'forming', VALUES(updated_at), updated_at), "+
		"status = IF(status = 'forming', VALUES(status), status)",
		g.ID, g.ActivityID, g.LeaderID, g.Size, string(g.Status), g.Paid, g.CreatedAt.UTC(), g.ExpiresAt.UTC(),
		time.Now().UTC()).Error
	if err != nil {
		return fmt.Errorf("%w: write group %s: %w", ErrUnavailable, g.ID, err)
	}
	return nil
}

// Persisted counts activityID's recorded orders, and the units of those
// that hold stock (pending payment or paid): what Redis should have sold.
func (s *Orders) Persisted(ctx context.Context, activityID int64) (orders, units int64, err error) {
	var r struct {
		Orders int64
		Units  int64
	}
	err = s.db.WithContext(ctx).Model(&OrderRow{}).
		Select("COUNT(*) AS orders, COALESCE(SUM(CASE WHEN status IN ('pending_payment', 'paid') THEN quantity ELSE 0 END), 0) AS units").
		Where("activity_id = ?", activityID).Scan(&r).Error
	if err != nil {
		return 0, 0, fmt.Errorf("%w: count persisted orders: %w", ErrUnavailable, err)
	}
	return r.Orders, r.Units, nil
}
