package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
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
	PaymentID   *string    `gorm:"column:payment_id"` // migrations/00009
	ItemSKU     *string    `gorm:"column:item_sku"`   // migrations/00011; NULL: the sale's one item, before items
	// CancelReason is why a cancelled order was (migrations/00012); NULL:
	// not cancelled, or cancelled before the record carried a reason.
	CancelReason *string `gorm:"column:cancel_reason"`
	// EventSeq is the order's order.accepted's place in the outbox
	// (migrations/00018); NULL: written before it, the event a row of
	// webhook_events.
	EventSeq *uint64 `gorm:"column:event_seq"`
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
	if r.PaymentID != nil {
		o.PaymentID = *r.PaymentID
	}
	if r.ItemSKU != nil {
		o.Item = *r.ItemSKU
	}
	if r.CancelReason != nil {
		o.CancelReason = order.CancelReason(*r.CancelReason)
	}
	if o.Status == order.Refunded {
		o.RefundedAt = o.CancelledAt // a refunded order's end is its refund (redisstore's parseRecord)
	}
	return o
}

// Orders is the orders repository. Its writes go through a batch.Loop:
// concurrent writers share one multi-row statement, one statement at a
// time, sized by how long statements take (WriteOptions, writes.go). Close
// it to stop that.
//
// Each batch's statement runs in a transaction with the batch's order
// events (webhook.OrderEvents of every order written, and activity.sold_out
// of an order that sold its sale out) appended to the outbox
// (docs/webhooks.md): an event commits with the order's state it reports,
// or not at all.
type Orders struct {
	// OnCommit, when not nil, is called after a batch's transaction
	// committed, with the events it appended (those already in the outbox
	// among them: a re-written order derives its events again, and the
	// outbox kept its first copy, with the same id). An order's
	// order.accepted is its row, not among them: the order streams, which
	// OnCommit publishes to, start every stream with it (stream.Orders.Open:
	// from the outbox, or derived from Redis before the order is written),
	// so publishing it was never needed (issue 43). Never called for a
	// batch that did not commit. It runs on the batching loop's goroutine:
	// it must return fast (hand the events on), and it must be set before
	// the first write. Also called by WriteGroup with a group's event.
	OnCommit func(ctx context.Context, events []webhook.Event)

	db     *gorm.DB
	opts   WriteOptions
	pace   *pace
	writes *batch.Loop[*orderWrite]

	// beforeUpsert, set by tests before the first write, is called in each
	// batch's transaction just before its orders' statement is sent (which
	// goes past gorm's callbacks: execDirect).
	beforeUpsert func()
	// withArgs sends every batch's values as the driver's arguments, as
	// before upsertText (the bench's A/B; tests).
	withArgs bool
}

// NewOrders returns the repository over db, its writes tuned by the
// defaults of WriteOptions.
func NewOrders(db *gorm.DB) *Orders { return NewOrdersWith(db, WriteOptions{}) }

// NewOrdersWith returns the repository over db, its writes tuned by o.
func NewOrdersWith(db *gorm.DB, o WriteOptions) *Orders {
	o = o.withDefaults()
	s := &Orders{db: db, opts: o, pace: newPace(o)}
	s.writes = batch.New(s.send, batch.Options{Max: o.Max})
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
// repeated change never moves a status backwards; the paying payment comes
// with the change that set it and stays (a later change carries it too).
// An order's item never changes: written with the row, never updated; nor
// does its event_seq, its order.accepted's place in the outbox (an order
// written again keeps the first, and the seq its write took is a gap).
// fence is assigned last:
// MySQL evaluates the assignments left to right and the others compare
// against the old value.
//
// It goes as text, its arguments interpolated, where the events beside it
// go prepared (multiRow): prepared, in chunks, it cost MariaDB no less in
// three runs of bench-outbox side by side (−5.5, +4 and +6 µs an order;
// docs/benchmarks.md): its values are numbers and short names, cheap to
// parse, unlike the events' escaped JSON bodies.
func upsert(n int) string {
	row := "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
	return upsertHead + strings.TrimSuffix(strings.Repeat(row+",", n), ",") + upsertTail
}

// upsertHead and upsertTail are upsert's text before and after its rows.
const (
	upsertHead = `INSERT INTO orders (order_no, activity_id, user_id, quantity, price_cents, amount_cents, status, fence,
    created_at, paid_at, cancelled_at, updated_at, group_id, payment_id, item_sku, cancel_reason, event_seq) VALUES `
	upsertTail = `
ON DUPLICATE KEY UPDATE
    status       = IF(VALUES(fence) > fence, VALUES(status), status),
    cancel_reason = IF(VALUES(fence) > fence, VALUES(cancel_reason), cancel_reason),
    payment_id   = IF(VALUES(fence) > fence, COALESCE(VALUES(payment_id), payment_id), payment_id),
    paid_at      = IF(VALUES(fence) > fence, VALUES(paid_at), paid_at),
    cancelled_at = IF(VALUES(fence) > fence, VALUES(cancelled_at), cancelled_at),
    updated_at   = IF(VALUES(fence) > fence, VALUES(updated_at), updated_at),
    fence        = GREATEST(fence, VALUES(fence))`
)

func nullable(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// nonEmpty is s, or NULL for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orderWrite is one caller's order waiting for the next batch.
type orderWrite struct {
	ctx  context.Context // the caller's: once it ends, the order is not written (answerLeft)
	o    order.Order
	err  error
	done chan struct{}
}

// maxWriteBatch is WriteOptions.Max's default: 17 placeholders a row, and
// up to 3 events of 8 an order, well under MySQL's 65,535 a statement.
const maxWriteBatch = 500

// Write records o's current state, together with whatever other callers are
// writing at the moment: one multi-row statement per batch. It returns when
// o's batch committed (or failed). Idempotent: see upsert.
func (s *Orders) Write(ctx context.Context, o order.Order) error {
	return s.WriteMany(ctx, []order.Order{o})
}

// WriteMany is Write for many orders: they join the next batches together
// (up to WriteOptions.Max rows a statement). It returns when all were
// written, or with the first error. Those not yet sent when ctx ends are
// not written.
func (s *Orders) WriteMany(ctx context.Context, os []order.Order) error {
	ws := make([]*orderWrite, len(os))
	for i, o := range os {
		ws[i] = &orderWrite{ctx: ctx, o: o, done: make(chan struct{})}
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
			return ctx.Err() // those already sent may still land; they are idempotent
		}
	}
	return nil
}

// writeBatch writes one batch in one transaction (within
// WriteOptions.Timeout: exec): one statement of the orders' rows, then
// their other events into the outbox; ctx ends when Close's drain time is
// over. After the commit it hands those events to OnCommit.
//
// An order's order.accepted is its row (migrations/00018): the row's
// event_seq is the event's place in the outbox, taken from the outbox's
// clock with the other events' seqs, so the clock is taken first, before
// the upsert (AppendTx takes it last). That cannot deadlock: only this
// write locks orders' rows, and it holds the clock when it does.
func (s *Orders) writeBatch(ctx context.Context, batch []*orderWrite) error {
	batch = latestOnce(batch)
	now := time.Now().UTC()
	var args []any
	if s.withArgs || !literalsFit(batch) {
		args = upsertArgs(batch, now)
	}
	var events []webhook.Event
	err := s.exec(ctx, func(tx *gorm.DB) error {
		var err error
		if events, err = s.orderEvents(tx, batch); err != nil {
			return err
		}
		base, err := takeSeqs(tx, len(batch)+len(events))
		if err != nil {
			return err
		}
		if s.beforeUpsert != nil {
			s.beforeUpsert()
		}
		if args == nil {
			err = execDirect(tx, upsertText(batch, now, base))
		} else {
			seqs := make([]uint64, len(batch)) // boxed from here: one allocation, not one an order
			for i := range batch {
				seqs[i] = base + uint64(i) + 1
				args[i*upsertCols+upsertCols-1] = &seqs[i]
			}
			err = execDirect(tx, upsert(len(batch)), args...)
		}
		if err != nil {
			return err
		}
		return insertEvents(tx, base+uint64(len(batch)), events)
	})
	if err != nil {
		return fmt.Errorf("%w: write %d orders: %w", ErrUnavailable, len(batch), err)
	}
	s.committed(ctx, events)
	return nil
}

// upsertCols is the upsert's values a row.
const upsertCols = 17

// upsertArgs is the upsert's arguments for batch, the last of each row (its
// event_seq) left for the caller.
func upsertArgs(batch []*orderWrite, now time.Time) []any {
	boxedNow := any(now) // boxed once, not once an order
	args := make([]any, 0, upsertCols*len(batch))
	for _, w := range batch {
		o := w.o
		args = append(args, o.No, o.ActivityID, o.UserID, o.Quantity, o.PriceCents, o.AmountCents, string(o.Status),
			o.Fence, o.CreatedAt.UTC(), nullable(o.PaidAt), nullable(o.CancelledAt), boxedNow, nonEmpty(o.GroupID), nonEmpty(o.PaymentID),
			nonEmpty(o.Item), nonEmpty(string(o.CancelReason)), nil)
	}
	return args
}

// upsertText is the upsert of batch with its values written into the text,
// the rows' event_seqs base+1 …: what the driver would send for upsert(n)
// and upsertArgs (connect.MySQL's interpolateParams), without boxing 17
// values a row into arguments, database/sql converting each and the
// driver writing each (issue 43: the worker's CPU an order). Only for a
// batch whose strings are literals as they are (literalsFit): then the
// text is the same under either escaping of the server's (a backslash is
// an escape unless NO_BACKSLASH_ESCAPES), and needs neither.
func upsertText(batch []*orderWrite, now time.Time, base uint64) string {
	b := make([]byte, 0, len(upsertHead)+len(upsertTail)+220*len(batch))
	b = append(b, upsertHead...)
	nowText := appendDatetime(nil, now)
	for i, w := range batch {
		o := &w.o
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '(')
		b = appendString(b, o.No)
		b = appendInt(b, o.ActivityID)
		b = appendInt(b, o.UserID)
		b = appendInt(b, int64(o.Quantity))
		b = appendInt(b, o.PriceCents)
		b = appendInt(b, o.AmountCents)
		b = appendString(append(b, ','), string(o.Status))
		b = appendInt(b, o.Fence)
		b = appendDatetime(append(b, ','), o.CreatedAt.UTC())
		b = appendNullTime(append(b, ','), o.PaidAt)
		b = appendNullTime(append(b, ','), o.CancelledAt)
		b = append(append(b, ','), nowText...)
		b = appendNullString(append(b, ','), o.GroupID)
		b = appendNullString(append(b, ','), o.PaymentID)
		b = appendNullString(append(b, ','), o.Item)
		b = appendNullString(append(b, ','), string(o.CancelReason))
		b = strconv.AppendUint(append(b, ','), base+uint64(i)+1, 10)
		b = append(b, ')')
	}
	b = append(b, upsertTail...)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not written again
}

// literalsFit says every string of batch goes into the text as it is: no
// quote, no backslash, no control byte (upsertText). Order numbers,
// statuses, payment ids and reasons always do; an item's SKU is the
// shop's, and one that does not sends its batch as arguments.
func literalsFit(batch []*orderWrite) bool {
	for _, w := range batch {
		o := &w.o
		for _, v := range [...]string{o.No, string(o.Status), o.GroupID, o.PaymentID, o.Item, string(o.CancelReason)} {
			for i := 0; i < len(v); i++ {
				if c := v[i]; c < 0x20 || c == '\'' || c == '\\' || c == 0x7f {
					return false
				}
			}
		}
	}
	return true
}

func appendInt(b []byte, v int64) []byte { return strconv.AppendInt(append(b, ','), v, 10) }

func appendString(b []byte, v string) []byte {
	b = append(b, '\'')
	b = append(b, v...)
	return append(b, '\'')
}

func appendNullString(b []byte, v string) []byte {
	if v == "" {
		return append(b, "NULL"...)
	}
	return appendString(b, v)
}

// appendDatetime writes t as the driver does (its Loc is UTC:
// connect.MySQL): a quoted 'YYYY-MM-DD hh:mm:ss' and its fraction, without
// trailing zeros; the zero time as '0000-00-00'.
func appendDatetime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "'0000-00-00'"...)
	}
	b = append(b, '\'')
	b = t.AppendFormat(b, "2006-01-02 15:04:05.999999999")
	return append(b, '\'')
}

func appendNullTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "NULL"...)
	}
	return appendDatetime(b, t.UTC())
}

// latestOnce is batch with each order once, at its latest state (the
// highest fence; of equal ones, the last), in batch's order: b itself when
// no order is there twice. An order is there twice when its sync ran twice
// at once (a task delivered again, a retry beside a slow first try). One
// statement must not write a row twice: MySQL takes it (the second
// updates the first), but go-mysql-server (embedded memory mode) wrote a
// second row of an order already there, updated twice in one statement
// (TestOrders_sameOrderTwiceInABatch_oneRow), and the events of both
// would be inserted twice too. Its callers are all answered: send answers
// every write of the batch it was given.
func latestOnce(b []*orderWrite) []*orderWrite {
	if len(b) < 2 {
		return b
	}
	at := make(map[string]int, len(b))
	twice := false
	for i, w := range b {
		if j, ok := at[w.o.No]; ok {
			twice = true
			if w.o.Fence < b[j].o.Fence {
				continue
			}
		}
		at[w.o.No] = i
	}
	if !twice {
		return b
	}
	out := make([]*orderWrite, 0, len(at))
	for i, w := range b {
		if at[w.o.No] == i {
			out = append(out, w)
		}
	}
	return out
}

// committed hands a committed transaction's events to OnCommit.
func (s *Orders) committed(ctx context.Context, events []webhook.Event) {
	if s.OnCommit != nil && len(events) > 0 {
		s.OnCommit(ctx, events)
	}
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
//
// A group that has ended (succeeded or failed) has its event
// (group.succeeded, group.failed) appended in the same transaction, of the
// status the row holds after the write: the row's status, not the
// caller's picture, so no event reports an end MySQL does not record. The
// event's id is fixed by the group and its end, so writing the group again
// appends nothing new. OnCommit gets it after the commit.
func (s *Orders) WriteGroup(ctx context.Context, g order.Group) error {
	var events []webhook.Event
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Exec("INSERT INTO `groups` (group_id, activity_id, leader_user_id, size, status, paid, "+
			"created_at, expires_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?) ON DUPLICATE KEY UPDATE "+
			"paid = IF(status = 'forming', GREATEST(paid, VALUES(paid)), paid), "+
			"updated_at = IF(status = 'forming', VALUES(updated_at), updated_at), "+
			"status = IF(status = 'forming', VALUES(status), status)",
			g.ID, g.ActivityID, g.LeaderID, g.Size, string(g.Status), g.Paid, g.CreatedAt.UTC(), g.ExpiresAt.UTC(),
			time.Now().UTC()).Error
		if err != nil || g.Status == order.Forming {
			return err
		}
		var status string
		if err := tx.Raw("SELECT status FROM `groups` WHERE group_id = ?", g.ID).Row().Scan(&status); err != nil {
			return err
		}
		if order.GroupStatus(status) != g.Status {
			return nil // the row ended otherwise before (Redis never does this): no event of an end MySQL does not hold
		}
		ev, ok := webhook.GroupEvent(g, orTime(g.EndedAt, g.ExpiresAt))
		if !ok {
			return nil
		}
		events = append(events, ev)
		return AppendTx(tx, ev)
	})
	if err != nil {
		return fmt.Errorf("%w: write group %s: %w", ErrUnavailable, g.ID, err)
	}
	s.committed(ctx, events)
	return nil
}

// orTime is t, or def when t is zero.
func orTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
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
