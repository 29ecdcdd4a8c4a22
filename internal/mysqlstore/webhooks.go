package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// Webhooks is the record of order events and webhooks in MySQL
// (migrations/00010): the outbox the producers append to in their own
// transactions (AppendTx), the endpoints, and the delivery log, which it
// writes in batches in the background.
type Webhooks struct {
	db  *gorm.DB
	log *batch.Loop[webhook.Attempt]
	box *secretBox // the endpoints' secrets at rest (webhooks_secrets.go)

	// serial: see SerialCommits.
	serial bool
	// currency is the orders' (SetCurrency): their order.accepted reports
	// it.
	currency string
	// betweenReads, set by tests, runs between readOutbox's two reads
	// and between Of's.
	betweenReads func()
}

var (
	_ webhook.Outbox    = (*Webhooks)(nil)
	_ webhook.Endpoints = (*Webhooks)(nil)
	_ webhook.Attempts  = (*Webhooks)(nil)
)

// NewWebhooks returns the repository, storing endpoints' secrets as they
// are; Close writes what its log holds.
func NewWebhooks(db *gorm.DB) *Webhooks {
	w, _ := NewWebhooksWithKeys(db, SecretKeys{}) // no key: nothing to fail
	return w
}

// NewWebhooksWithKeys returns the repository, encrypting endpoints'
// secrets under keys.Current (and opening those under keys.Old too);
// Close writes what its log holds.
func NewWebhooksWithKeys(db *gorm.DB, keys SecretKeys) (*Webhooks, error) {
	box, err := newSecretBox(keys)
	if err != nil {
		return nil, err
	}
	w := &Webhooks{db: db, box: box, currency: defaultCurrency}
	w.log = batch.New(w.writeAttempts, batch.Options{Max: 500, Backlog: 100_000})
	return w, nil
}

// SerialCommits says the SQL server commits one transaction at a time
// (embedded memory mode: the turns of internal/embedded). There the
// dispatched events are not pruned (an in-memory database lives as long as
// its process, and go-mysql-server's DELETE rewrites the table, in time
// that grows with it, holding the one turn every order write waits for)
// and no repair finds them (the Redis beside it is in the same process:
// lost with it).
func (w *Webhooks) SerialCommits() { w.serial = true }

// SetCurrency sets the orders' currency (PAYMENT_CURRENCY; "cny" unless
// set), which the orders' order.accepted events read from their rows
// report: the one the worker's Orders writes them with
// (WriteOptions.Currency). Set it before the first read.
func (w *Webhooks) SetCurrency(c string) { w.currency = c }

// EncryptsSecrets says whether endpoints' secrets are written encrypted
// (a WEBHOOK_SECRET_KEY is configured).
func (w *Webhooks) EncryptsSecrets() bool { return w.box.encrypts() }

// Close writes the attempts still waiting, for up to the batch loop's
// drain time.
func (w *Webhooks) Close() { w.log.Close() }

// webhooksUnavailable is a failure of MySQL under the webhooks' records:
// the domain's ErrUnavailable and this package's.
func webhooksUnavailable(what string, err error) error {
	return fmt.Errorf("%w (%w): %s: %w", webhook.ErrUnavailable, ErrUnavailable, what, err)
}

// EventRow is a row of webhook_events.
type EventRow struct {
	Seq        uint64    `gorm:"column:seq;primaryKey;autoIncrement"`
	ID         string    `gorm:"column:id"`
	Type       string    `gorm:"column:type"`
	Subject    string    `gorm:"column:subject"`
	Sequence   int64     `gorm:"column:sequence"`
	ActivityID uint64    `gorm:"column:activity_id"`
	OccurredAt time.Time `gorm:"column:occurred_at"`
	Body       string    `gorm:"column:body"`
	CreatedAt  time.Time `gorm:"column:created_at"`
}

// TableName is the table's name.
func (EventRow) TableName() string { return "webhook_events" }

// AppendTx appends events to the outbox in tx, the transaction that records
// the change they report, so that they commit with it or not at all. An
// event appended before (the same subject, sequence and type: a change
// recorded again) is kept as it was, its id too. Producers call it inside
// their own transaction, as its last statement; its error should abort
// that transaction.
//
// It takes the outbox's clock first (takeSeqs): its price is that
// appending transactions commit one at a time from the clock on: hence
// last, so that what they hold the clock for is the insert and the
// commit, and so that a transaction holding it never waits for a lock
// another holds (no deadlock of the clock). InnoDB releases row locks at
// the commit before its log flush, so the clock is not held over the
// flush. (The orders' write takes it before its upsert instead, for the
// orders' own event_seq: Orders.writeBatch.)
func AppendTx(tx *gorm.DB, events ...webhook.Event) error {
	if len(events) == 0 {
		return nil
	}
	base, err := takeSeqs(tx, len(events))
	if err != nil {
		return err
	}
	return insertEvents(tx, base, events)
}

// takeSeqs takes the outbox's clock (migrations/00016, 00018) and n seqs
// from it, base+1 … base+n: the one row every appending transaction
// updates and holds until it commits, so that the seqs are handed out in
// commit order and the dispatcher's cursor misses none (without the clock
// two transactions commit in either order). A rollback gives its seqs
// back; a duplicate event's seq is a gap nobody fills.
func takeSeqs(tx *gorm.DB, n int) (base uint64, err error) {
	if err := tx.Exec("UPDATE webhook_outbox_clock SET appends = appends + 1, seq = seq + ? WHERE id = 1", n).Error; err != nil {
		return 0, err
	}
	var last uint64
	if err := tx.Raw("SELECT seq FROM webhook_outbox_clock WHERE id = 1").Row().Scan(&last); err != nil {
		return 0, fmt.Errorf("the outbox's clock: %w", err)
	}
	return last - uint64(n), nil
}

// insertEvents inserts events at seqs base+1 … in tx, which holds the
// outbox's clock (takeSeqs).
func insertEvents(tx *gorm.DB, base uint64, events []webhook.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := any(time.Now().UTC()) // boxed once, not once an event
	args := make([]any, 0, 9*len(events))
	for i, e := range events {
		// The body as a string without its copy: an Event's Body is never
		// changed once rendered (webhook.Event), and the driver only reads
		// it into the statement's packet before this returns.
		args = append(args, base+uint64(i)+1, e.ID, string(e.Type), e.Subject, e.Sequence, e.ActivityID, e.At.UTC(), unsafe.String(unsafe.SliceData(e.Body), len(e.Body)), now)
	}
	return eventsInsert.exec(tx, len(events), args)
}

// eventsInsert is AppendTx's statement. Only a duplicate event — its
// subject, sequence and type, the unique key (migrations/00017) — is let
// through, keeping the row's first id and seq (ON DUPLICATE KEY rather
// than INSERT IGNORE, which would turn any other error into a warning).
var eventsInsert = newMultiRow("INSERT INTO webhook_events (seq, id, type, subject, sequence, activity_id, occurred_at, body, created_at) VALUES ",
	"(?, ?, ?, ?, ?, ?, ?, ?, ?)", " ON DUPLICATE KEY UPDATE id = id")

// Append appends events in a transaction of their own: for a caller with
// no change of its own to record with them (the tests, a benchmark).
func (w *Webhooks) Append(ctx context.Context, events ...webhook.Event) error {
	if err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return AppendTx(tx, events...) }); err != nil {
		return webhooksUnavailable("append events", err)
	}
	return nil
}

// cursorSQL is the dispatcher's cursor: the last seq dispatched.
const cursorSQL = "(SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches)"

// The outbox is two tables (migrations/00018): webhook_events, and the
// orders whose event_seq places their order.accepted among its events,
// rendered from the row when read (outboxRow.event). eventsSide and
// ordersSide select the same columns from each, in the same order, their
// times of one type (go-mysql-server, embedded memory mode, sends a union
// of DATETIME(3) and DATETIME(6) as text), widened: narrowing would round
// on MySQL 8 where the event's body truncates.
const (
	eventsSide = "SELECT seq, id, type, subject, sequence, activity_id, CAST(occurred_at AS DATETIME(6)) AS occurred_at, body, " +
		"0 AS user_id, 0 AS quantity, 0 AS amount_cents, NULL AS group_id, NULL AS sku FROM webhook_events"
	ordersSide = "SELECT o.event_seq AS seq, '' AS id, 'order.accepted' AS type, o.order_no AS subject, 1 AS sequence, " +
		"o.activity_id, o.created_at AS occurred_at, NULL AS body, o.user_id, o.quantity, o.amount_cents, o.group_id, " +
		"COALESCE(o.item_sku, a.sku) AS sku FROM orders o LEFT JOIN activities a ON a.id = o.activity_id"
)

// readOutbox reads the outbox's events in seq order, up to limit: those of
// webhook_events that meet events (a condition on seq, its arguments
// evArgs) and the orders' that meet orders (on o.event_seq, ordArgs),
// each side a range of its key read up to limit, merged here, and their
// rows. Merged in SQL (a UNION ordered and limited), MariaDB sorted the
// union in a temporary table, on disk for the bodies' TEXT: the
// dispatcher's read cost it 3 µs an event against 1 (make bench-outbox).
//
// Two statements see two moments, so both read only up to the clock's
// last committed seq, read first: every seq up to it is committed or never
// will be (takeSeqs), and what commits between the two statements is
// above it. Without that bound, a payment's event committed (seq 100)
// between the events' read and the orders', then an order's (101), would
// have been passed over: the orders' read sees 101, the cursor moves to
// it, and 100 was never read.
func (w *Webhooks) readOutbox(ctx context.Context, what, events string, evArgs []any, orders string, ordArgs []any, limit int) ([]webhook.Event, []outboxRow, error) {
	var upTo uint64
	if err := w.db.WithContext(ctx).Raw("SELECT seq FROM webhook_outbox_clock WHERE id = 1").Row().Scan(&upTo); err != nil {
		return nil, nil, webhooksUnavailable(what, err)
	}
	var ev, ord []outboxRow
	err := w.db.WithContext(ctx).Raw(eventsSide+" WHERE "+events+" AND seq <= ? ORDER BY seq LIMIT ?", append(evArgs, upTo, limit)...).Scan(&ev).Error
	if err != nil {
		return nil, nil, webhooksUnavailable(what, err)
	}
	if w.betweenReads != nil {
		w.betweenReads()
	}
	err = w.db.WithContext(ctx).Raw(ordersSide+" WHERE "+orders+" AND o.event_seq <= ? ORDER BY o.event_seq LIMIT ?", append(ordArgs, upTo, limit)...).Scan(&ord).Error
	if err != nil {
		return nil, nil, webhooksUnavailable(what, err)
	}
	rows := make([]outboxRow, 0, min(limit, len(ev)+len(ord)))
	for len(rows) < limit && (len(ev) > 0 || len(ord) > 0) {
		if len(ord) == 0 || len(ev) > 0 && ev[0].Seq < ord[0].Seq {
			rows, ev = append(rows, ev[0]), ev[1:]
		} else {
			rows, ord = append(rows, ord[0]), ord[1:]
		}
	}
	out := make([]webhook.Event, len(rows))
	for i := range rows {
		out[i] = w.event(&rows[i])
	}
	return out, rows, nil
}

// seqsSQL is the outbox's seqs in order, up to a limit, as readOutbox
// reads its events (a UNION of seqs alone: sorted in memory).
func seqsSQL(events, orders string) string {
	return "(SELECT seq FROM webhook_events WHERE " + events + " ORDER BY seq LIMIT ?) UNION ALL " +
		"(SELECT event_seq FROM orders WHERE " + orders + " ORDER BY event_seq LIMIT ?) ORDER BY seq LIMIT ?"
}

// outboxRow is a row of readOutbox: an event of webhook_events, or (Body
// NULL) an order's order.accepted, with what its body is rendered from.
type outboxRow struct {
	Seq         uint64    `gorm:"column:seq"`
	ID          string    `gorm:"column:id"`
	Type        string    `gorm:"column:type"`
	Subject     string    `gorm:"column:subject"`
	Sequence    int64     `gorm:"column:sequence"`
	ActivityID  uint64    `gorm:"column:activity_id"`
	OccurredAt  time.Time `gorm:"column:occurred_at"`
	Body        *string   `gorm:"column:body"`
	UserID      uint64    `gorm:"column:user_id"`
	Quantity    int       `gorm:"column:quantity"`
	AmountCents int64     `gorm:"column:amount_cents"`
	GroupID     *string   `gorm:"column:group_id"`
	SKU         *string   `gorm:"column:sku"`
}

// event is r as the domain's. An order's order.accepted is derived by the
// producers' own derivation (webhook.OrderEvents, from the fields the row
// keeps as they were accepted): the same id, sequence and body as every
// read before, and as an order stream's derivation from Redis before the
// order was written (stream.Orders.Open).
func (w *Webhooks) event(r *outboxRow) webhook.Event {
	if r.Body != nil {
		return webhook.Event{ID: r.ID, Type: webhook.Type(r.Type), Subject: r.Subject, Sequence: r.Sequence,
			ActivityID: int64(r.ActivityID), At: r.OccurredAt.UTC(), Body: []byte(*r.Body)}
	}
	o := order.Order{No: r.Subject, ActivityID: int64(r.ActivityID), UserID: int64(r.UserID), Quantity: r.Quantity,
		AmountCents: r.AmountCents, Status: order.PendingPayment, CreatedAt: r.OccurredAt.UTC()}
	if r.GroupID != nil {
		o.GroupID = *r.GroupID
	}
	var sku string
	if r.SKU != nil {
		sku = *r.SKU
	}
	return webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: sku, Currency: w.currency})[0]
}

// read runs q, a query of one side, and returns its events and rows.
func (w *Webhooks) read(ctx context.Context, what, q string, args ...any) ([]webhook.Event, []outboxRow, error) {
	var rows []outboxRow
	if err := w.db.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, nil, webhooksUnavailable(what, err)
	}
	out := make([]webhook.Event, len(rows))
	for i := range rows {
		out[i] = w.event(&rows[i])
	}
	return out, rows, nil
}

// Undispatched returns up to limit events after the dispatcher's cursor, in
// the order they were committed (their seq: takeSeqs), and the seq of the
// last (0 when none: nothing to mark, and no second query for the cursor,
// which an idle dispatcher asked for five times a second): a range of
// each side's key.
func (w *Webhooks) Undispatched(ctx context.Context, limit int) ([]webhook.Event, webhook.Position, error) {
	out, rows, err := w.readOutbox(ctx, "undispatched events", "seq > "+cursorSQL, nil, "o.event_seq > "+cursorSQL, nil, limit)
	if err != nil || len(rows) == 0 {
		return nil, 0, err
	}
	return out, webhook.Position(rows[len(rows)-1].Seq), nil
}

// Skip moves the dispatcher's cursor past up to limit events and says how
// many it passed. MariaDB counts them and finds the last in the ranges of
// the keys it reads anyway, and sends one row: reading their seqs into the
// worker, a row each through gorm's Scan, was 3% of its CPU at a launch
// with no endpoint (issue 43).
func (w *Webhooks) Skip(ctx context.Context, limit int) (int, error) {
	var n int
	var last uint64
	err := w.db.WithContext(ctx).Raw("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM ("+
		seqsSQL("seq > "+cursorSQL, "event_seq > "+cursorSQL)+") AS passed", limit, limit, limit).
		Row().Scan(&n, &last)
	if err != nil {
		return 0, webhooksUnavailable("skip events", err)
	}
	if n == 0 {
		return 0, nil
	}
	return n, w.MarkDispatched(ctx, webhook.Position(last))
}

// cursor is the last seq dispatched.
func (w *Webhooks) cursor(ctx context.Context) (webhook.Position, error) {
	var c []uint64
	if err := w.db.WithContext(ctx).Raw("SELECT " + cursorSQL).Scan(&c).Error; err != nil {
		return 0, webhooksUnavailable("dispatch cursor", err)
	}
	if len(c) == 0 {
		return 0, nil
	}
	return webhook.Position(c[0]), nil
}

// MarkDispatched moves the dispatcher's cursor to through: one row of
// webhook_dispatches, through and the time, the repair's history. A
// position the cursor has passed already (a leader that lost its lead
// dispatching what the next one did) is kept as a pass of its own, or
// ignored when it is one already.
func (w *Webhooks) MarkDispatched(ctx context.Context, through webhook.Position) error {
	if through == 0 {
		return nil
	}
	err := w.db.WithContext(ctx).Exec("INSERT INTO webhook_dispatches (through_seq, dispatched_at) VALUES (?, ?) "+
		"ON DUPLICATE KEY UPDATE through_seq = through_seq", uint64(through), time.Now().UTC()).Error
	if err != nil {
		return webhooksUnavailable("mark events dispatched", err)
	}
	return nil
}

// Of returns subject's events after sequence after, in order: what an
// order's stream replays on reconnect (issue 42). An order's
// order.accepted is read from its row (or, for an order written before
// migrations/00018, from webhook_events).
//
// The rows of webhook_events are read first, the order's row second: an
// order's write commits its row and its later events at once, so a write
// committed between the two reads shows its order.accepted without the
// events after it (which the stream, subscribed before it reads, hears of
// live), never the later events without order.accepted, a stream's first.
func (w *Webhooks) Of(ctx context.Context, subject string, after int64) ([]webhook.Event, error) {
	rest, _, err := w.read(ctx, "events of "+subject, eventsSide+" WHERE subject = ? AND sequence > ? ORDER BY sequence, seq", subject, after)
	if err != nil {
		return nil, err
	}
	if after >= webhook.SeqAccepted {
		return rest, nil
	}
	if w.betweenReads != nil {
		w.betweenReads()
	}
	acc, _, err := w.read(ctx, "events of "+subject, ordersSide+" WHERE o.order_no = ? AND o.event_seq IS NOT NULL", subject)
	if err != nil {
		return nil, err
	}
	return append(acc, rest...), nil
}

// Event returns the event of id, or an error wrapping
// webhook.ErrNotFound. An order's order.accepted kept as its row has no id
// stored: its id begins with its order number's milliseconds
// (webhook.ID), which narrows the orders to those numbered in 8 of them
// (one range of the number's key for each sale and shard), and the one
// whose event has this id is it.
func (w *Webhooks) Event(ctx context.Context, id string) (webhook.Event, error) {
	es, _, err := w.read(ctx, "event "+id, eventsSide+" WHERE id = ?", id)
	if err != nil {
		return webhook.Event{}, err
	}
	if len(es) > 0 {
		return es[0], nil
	}
	if e, ok, err := w.acceptedByID(ctx, id); err != nil || ok {
		return e, err
	}
	return webhook.Event{}, fmt.Errorf("%w: no event %s", webhook.ErrNotFound, id)
}

// acceptedByID finds the order.accepted of id among the orders' rows
// (Event).
func (w *Webhooks) acceptedByID(ctx context.Context, id string) (webhook.Event, bool, error) {
	ms, ok := webhook.IDTime(id)
	if !ok || ms > uint64(time.Now().Add(24*time.Hour).UnixMilli()) {
		return webhook.Event{}, false, nil
	}
	var sales []struct {
		ID     int64 `gorm:"column:id"`
		Shards int   `gorm:"column:shards"`
	}
	if err := w.db.WithContext(ctx).Raw("SELECT id, shards FROM activities").Scan(&sales).Error; err != nil {
		return webhook.Event{}, false, webhooksUnavailable("event "+id, err)
	}
	at := order.NoPrefixAt(ms)
	var froms []string
	for _, s := range sales {
		for shard := range max(s.Shards, 1) {
			froms = append(froms, order.InShard(strconv.FormatInt(s.ID, 10)+"-", shard, s.Shards)+at)
		}
	}
	for len(froms) > 0 { // 500 ranges a statement at most
		n := min(len(froms), 500)
		ranges := make([]string, n)
		args := make([]any, 0, 2*n)
		for i, from := range froms[:n] {
			// A range to "ZZ…" rather than LIKE 'prefix%': go-mysql-server
			// (embedded memory mode) missed numbers whose next character
			// was Y or Z by LIKE, and every one by a range to "prefix~".
			// A number's characters are Crockford's base32, [0-9A-Z]: the
			// 17 after at are at most as many Z.
			ranges[i] = "(o.order_no >= ? AND o.order_no <= ?)"
			args = append(args, from, from+"ZZZZZZZZZZZZZZZZZZ")
		}
		froms = froms[n:]
		es, _, err := w.read(ctx, "event "+id, ordersSide+" WHERE o.event_seq IS NOT NULL AND ("+strings.Join(ranges, " OR ")+")", args...)
		if err != nil {
			return webhook.Event{}, false, err
		}
		for _, e := range es {
			if e.ID == id {
				return e, true, nil
			}
		}
	}
	return webhook.Event{}, false, nil
}

// CountUndispatched is how many events wait for the dispatcher.
func (w *Webhooks) CountUndispatched(ctx context.Context) (int64, error) {
	var n int64
	err := w.db.WithContext(ctx).Raw("SELECT (SELECT COUNT(*) FROM webhook_events WHERE seq > " + cursorSQL +
		") + (SELECT COUNT(*) FROM orders WHERE event_seq > " + cursorSQL + ")").Row().Scan(&n)
	if err != nil {
		return 0, webhooksUnavailable("count undispatched events", err)
	}
	return n, nil
}

// OldestUndispatched is how long the oldest event waiting for the
// dispatcher has waited (0 when none waits): since it was appended, or
// for an order's order.accepted since the order was accepted.
func (w *Webhooks) OldestUndispatched(ctx context.Context) (time.Duration, error) {
	var at sql.NullTime
	err := w.db.WithContext(ctx).Raw("SELECT MIN(t) FROM ((SELECT created_at AS t FROM webhook_events WHERE seq > " + cursorSQL +
		" ORDER BY seq LIMIT 1) UNION ALL (SELECT created_at FROM orders WHERE event_seq > " + cursorSQL +
		" ORDER BY event_seq LIMIT 1)) AS firsts").Row().Scan(&at)
	if err != nil {
		return 0, webhooksUnavailable("oldest undispatched event", err)
	}
	if !at.Valid {
		return 0, nil
	}
	return max(0, time.Since(at.Time)), nil
}

// EndpointRow is a row of webhook_endpoints.
type EndpointRow struct {
	ID             uint64     `gorm:"column:id;primaryKey;autoIncrement"`
	URL            string     `gorm:"column:url"`
	Description    string     `gorm:"column:description"`
	Events         string     `gorm:"column:events"`
	Secret         string     `gorm:"column:secret"`
	PreviousSecret string     `gorm:"column:previous_secret"`
	PreviousUntil  *time.Time `gorm:"column:previous_until"`
	Enabled        bool       `gorm:"column:enabled"`
	DisabledReason string     `gorm:"column:disabled_reason"`
	CreatedAt      time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt      time.Time  `gorm:"column:updated_at;autoUpdateTime:false"`
}

// TableName is the table's name.
func (EndpointRow) TableName() string { return "webhook_endpoints" }

// The secrets' columns, which are also their ciphertexts' associated data.
const (
	colSecret         = "webhook_endpoints.secret"
	colPreviousSecret = "webhook_endpoints.previous_secret"
)

func (w *Webhooks) endpointRow(e webhook.Endpoint) EndpointRow {
	r := EndpointRow{ID: uint64(e.ID), URL: e.URL, Description: e.Description, Events: strings.Join(e.Events, ","),
		Secret: w.box.seal(colSecret, e.Secret), PreviousSecret: w.box.seal(colPreviousSecret, e.PreviousSecret), Enabled: e.Enabled, DisabledReason: e.DisabledReason,
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC()}
	if !e.PreviousUntil.IsZero() {
		t := e.PreviousUntil.UTC()
		r.PreviousUntil = &t
	}
	return r
}

// endpoint is r as the domain's, its secrets opened; current says both are
// stored as the configuration would write them now (sealed under the
// current key, or plaintext with no key).
func (w *Webhooks) endpoint(r EndpointRow) (e webhook.Endpoint, current bool, err error) {
	secret, cur1, err := w.box.open(colSecret, r.Secret)
	if err != nil {
		return webhook.Endpoint{}, false, fmt.Errorf("endpoint %d: %w", r.ID, err)
	}
	prev, cur2, err := w.box.open(colPreviousSecret, r.PreviousSecret)
	if err != nil {
		return webhook.Endpoint{}, false, fmt.Errorf("endpoint %d: %w", r.ID, err)
	}
	e = webhook.Endpoint{ID: int64(r.ID), URL: r.URL, Description: r.Description, Events: strings.Split(r.Events, ","),
		Secret: secret, PreviousSecret: prev, Enabled: r.Enabled, DisabledReason: r.DisabledReason,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.PreviousUntil != nil {
		e.PreviousUntil = r.PreviousUntil.UTC()
	}
	return e, cur1 && cur2, nil
}

// CreateEndpoint inserts e, setting its ID and times.
func (w *Webhooks) CreateEndpoint(ctx context.Context, e *webhook.Endpoint) error {
	e.CreatedAt, e.UpdatedAt = now(), now()
	r := w.endpointRow(*e)
	r.ID = 0
	if err := w.db.WithContext(ctx).Create(&r).Error; err != nil {
		return webhooksUnavailable("create endpoint", err)
	}
	e.ID = int64(r.ID)
	return nil
}

// Endpoints returns every endpoint, by id.
func (w *Webhooks) Endpoints(ctx context.Context) ([]webhook.Endpoint, error) {
	var rows []EndpointRow
	if err := w.db.WithContext(ctx).Order("id").Find(&rows).Error; err != nil {
		return nil, webhooksUnavailable("endpoints", err)
	}
	return w.endpoints(rows)
}

// EndpointsPage returns page (from 1) of the endpoints, by id, and how
// many there are.
func (w *Webhooks) EndpointsPage(ctx context.Context, page, pageSize int) ([]webhook.Endpoint, int64, error) {
	var total int64
	if err := w.db.WithContext(ctx).Model(&EndpointRow{}).Count(&total).Error; err != nil {
		return nil, 0, webhooksUnavailable("count endpoints", err)
	}
	var rows []EndpointRow
	if err := w.db.WithContext(ctx).Order("id").Limit(pageSize).Offset((page - 1) * pageSize).Find(&rows).Error; err != nil {
		return nil, 0, webhooksUnavailable("endpoints", err)
	}
	out, err := w.endpoints(rows)
	return out, total, err
}

func (w *Webhooks) endpoints(rows []EndpointRow) ([]webhook.Endpoint, error) {
	out := make([]webhook.Endpoint, len(rows))
	for i, r := range rows {
		e, _, err := w.endpoint(r)
		if err != nil {
			return nil, webhooksUnavailable("endpoints", err)
		}
		out[i] = e
	}
	return out, nil
}

// Endpoint returns endpoint id, or an error wrapping webhook.ErrNotFound.
func (w *Webhooks) Endpoint(ctx context.Context, id int64) (webhook.Endpoint, error) {
	e, _, err := w.endpointIn(w.db.WithContext(ctx), id)
	return e, err
}

func (w *Webhooks) endpointIn(tx *gorm.DB, id int64) (webhook.Endpoint, bool, error) {
	var r EndpointRow
	err := tx.Take(&r, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return webhook.Endpoint{}, false, fmt.Errorf("%w: no endpoint %d", webhook.ErrNotFound, id)
	}
	if err == nil {
		var e webhook.Endpoint
		var current bool
		if e, current, err = w.endpoint(r); err == nil {
			return e, current, nil
		}
	}
	return webhook.Endpoint{}, false, webhooksUnavailable(fmt.Sprintf("endpoint %d", id), err)
}

// UpdateEndpoint reads endpoint id under its row lock, lets fn change it,
// and writes it back, in one transaction; fn's error is returned as is.
func (w *Webhooks) UpdateEndpoint(ctx context.Context, id int64, fn func(*webhook.Endpoint) error) (webhook.Endpoint, error) {
	var out webhook.Endpoint
	var fnErr error
	err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		e, _, err := w.endpointIn(tx.Clauses(clause.Locking{Strength: "UPDATE"}), id)
		if err != nil {
			fnErr = err
			return err
		}
		if err := fn(&e); err != nil {
			fnErr = err
			return err
		}
		e.ID, e.UpdatedAt = id, now()
		r := w.endpointRow(e) // sealed under the current key: a row read as plaintext or under the old key is sealed again
		if err := tx.Select("*").Save(&r).Error; err != nil {
			return err
		}
		out = e
		return nil
	})
	if fnErr != nil {
		return webhook.Endpoint{}, fnErr
	}
	if err != nil {
		return webhook.Endpoint{}, webhooksUnavailable(fmt.Sprintf("update endpoint %d", id), err)
	}
	return out, nil
}

// DeleteEndpoint removes endpoint id and its delivery log.
func (w *Webhooks) DeleteEndpoint(ctx context.Context, id int64) error {
	var gone int64
	err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM webhook_endpoints WHERE id = ?", id)
		if res.Error != nil {
			return res.Error
		}
		gone = res.RowsAffected
		return tx.Exec("DELETE FROM webhook_attempts WHERE endpoint_id = ?", id).Error
	})
	if err != nil {
		return webhooksUnavailable(fmt.Sprintf("delete endpoint %d", id), err)
	}
	if gone == 0 {
		return fmt.Errorf("%w: no endpoint %d", webhook.ErrNotFound, id)
	}
	return nil
}

// DisableFailing disables endpoint id, saying it was failing, if it is
// enabled, and says whether it did.
func (w *Webhooks) DisableFailing(ctx context.Context, id int64) (bool, error) {
	res := w.db.WithContext(ctx).Exec("UPDATE webhook_endpoints SET enabled = 0, disabled_reason = ?, updated_at = ? "+
		"WHERE id = ? AND enabled = 1", webhook.DisabledFailing, now(), id)
	if res.Error != nil {
		return false, webhooksUnavailable(fmt.Sprintf("disable endpoint %d", id), res.Error)
	}
	return res.RowsAffected == 1, nil
}

// CountDisabledFailing is how many endpoints the worker disabled and nobody
// enabled again: what the alert watches.
func (w *Webhooks) CountDisabledFailing(ctx context.Context) (int64, error) {
	var n int64
	err := w.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM webhook_endpoints WHERE enabled = 0 AND disabled_reason = ?",
		webhook.DisabledFailing).Scan(&n).Error
	if err != nil {
		return 0, webhooksUnavailable("count disabled endpoints", err)
	}
	return n, nil
}
