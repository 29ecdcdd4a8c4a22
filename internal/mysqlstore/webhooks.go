package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unsafe"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/flashsale/flashsale/internal/batch"
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
	w := &Webhooks{db: db, box: box}
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

func (r EventRow) event() webhook.Event {
	return webhook.Event{ID: r.ID, Type: webhook.Type(r.Type), Subject: r.Subject, Sequence: r.Sequence,
		ActivityID: int64(r.ActivityID), At: r.OccurredAt.UTC(), Body: []byte(r.Body)}
}

// AppendTx appends events to the outbox in tx, the transaction that records
// the change they report, so that they commit with it or not at all. An
// event appended before (the same subject, sequence and type: a change
// recorded again) is kept as it was, its id too. Producers call it inside
// their own transaction, as its last statement; its error should abort
// that transaction.
//
// It takes the outbox's clock first (migrations/00016): the one row every
// appending transaction updates before its insert and holds until it
// commits, so that events take their seqs in commit order and the
// dispatcher's cursor misses none (an event's seq is its auto-increment,
// taken at the insert; without the clock two transactions commit in
// either order). Its price is that appending transactions commit one at a
// time from the clock on: hence last, so that what they hold the clock for
// is the insert and the commit, and so that a transaction holding it never
// waits for a lock another holds (no deadlock of the clock). InnoDB
// releases row locks at the commit before its log flush, so the clock is
// not held over the flush.
func AppendTx(tx *gorm.DB, events ...webhook.Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := tx.Exec("UPDATE webhook_outbox_clock SET appends = appends + 1 WHERE id = 1").Error; err != nil {
		return err
	}
	now := any(time.Now().UTC()) // boxed once, not once an event
	args := make([]any, 0, 8*len(events))
	for _, e := range events {
		// The body as a string without its copy: an Event's Body is never
		// changed once rendered (webhook.Event), and the driver only reads
		// it into the statement's packet before this returns.
		args = append(args, e.ID, string(e.Type), e.Subject, e.Sequence, e.ActivityID, e.At.UTC(), unsafe.String(unsafe.SliceData(e.Body), len(e.Body)), now)
	}
	return eventsInsert.exec(tx, len(events), args)
}

// eventsInsert is AppendTx's statement. Only a duplicate event — its
// subject, sequence and type, the unique key (migrations/00017) — is let
// through, keeping the row's first id (ON DUPLICATE KEY rather than
// INSERT IGNORE, which would turn any other error into a warning).
var eventsInsert = newMultiRow("INSERT INTO webhook_events (id, type, subject, sequence, activity_id, occurred_at, body, created_at) VALUES ",
	"(?, ?, ?, ?, ?, ?, ?, ?)", " ON DUPLICATE KEY UPDATE id = id")

// Append appends events in a transaction of their own: for a caller with
// no change of its own to record with them (the tests, a benchmark).
func (w *Webhooks) Append(ctx context.Context, events ...webhook.Event) error {
	if err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return AppendTx(tx, events...) }); err != nil {
		return webhooksUnavailable("append events", err)
	}
	return nil
}

const eventColumns = "id, type, subject, sequence, activity_id, occurred_at, body"

// cursorSQL is the dispatcher's cursor: the last seq dispatched;
// afterCursorSQL the events after it, oldest first, up to a limit.
const (
	cursorSQL      = "(SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches)"
	afterCursorSQL = " FROM webhook_events WHERE seq > " + cursorSQL + " ORDER BY seq LIMIT ?"
)

// Undispatched returns up to limit events after the dispatcher's cursor, in
// the order they were committed (their seq: AppendTx), and the seq of the
// last (0 when none: nothing to mark, and no second query for the cursor,
// which an idle dispatcher asked for five times a second): a range of the
// primary key.
func (w *Webhooks) Undispatched(ctx context.Context, limit int) ([]webhook.Event, webhook.Position, error) {
	var rows []EventRow
	err := w.db.WithContext(ctx).Raw("SELECT seq, "+eventColumns+afterCursorSQL, limit).
		Scan(&rows).Error
	if err != nil {
		return nil, 0, webhooksUnavailable("undispatched events", err)
	}
	if len(rows) == 0 {
		return nil, 0, nil
	}
	out := make([]webhook.Event, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, webhook.Position(rows[len(rows)-1].Seq), nil
}

// Skip moves the dispatcher's cursor past up to limit events and says how
// many it passed. MariaDB counts them and finds the last in the range of
// the primary key it reads anyway, and sends one row: reading their seqs
// into the worker, a row each through gorm's Scan, was 3% of its CPU at a
// launch with no endpoint (issue 43).
func (w *Webhooks) Skip(ctx context.Context, limit int) (int, error) {
	var n int
	var last uint64
	err := w.db.WithContext(ctx).Raw("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM (SELECT seq"+afterCursorSQL+") AS passed", limit).
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
// order's stream replays on reconnect (issue 42).
func (w *Webhooks) Of(ctx context.Context, subject string, after int64) ([]webhook.Event, error) {
	return w.events(ctx, "events of "+subject,
		"SELECT "+eventColumns+" FROM webhook_events WHERE subject = ? AND sequence > ? ORDER BY sequence, seq", subject, after)
}

func (w *Webhooks) events(ctx context.Context, what, q string, args ...any) ([]webhook.Event, error) {
	var rows []EventRow
	if err := w.db.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, webhooksUnavailable(what, err)
	}
	out := make([]webhook.Event, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, nil
}

// Event returns the event of id, or an error wrapping
// webhook.ErrNotFound.
func (w *Webhooks) Event(ctx context.Context, id string) (webhook.Event, error) {
	es, err := w.events(ctx, "event "+id, "SELECT "+eventColumns+" FROM webhook_events WHERE id = ?", id)
	if err != nil {
		return webhook.Event{}, err
	}
	if len(es) == 0 {
		return webhook.Event{}, fmt.Errorf("%w: no event %s", webhook.ErrNotFound, id)
	}
	return es[0], nil
}

// CountUndispatched is how many events wait for the dispatcher.
func (w *Webhooks) CountUndispatched(ctx context.Context) (int64, error) {
	var n int64
	if err := w.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM webhook_events WHERE seq > " + cursorSQL).Scan(&n).Error; err != nil {
		return 0, webhooksUnavailable("count undispatched events", err)
	}
	return n, nil
}

// OldestUndispatched is how long the oldest event waiting for the
// dispatcher has waited (0 when none waits).
func (w *Webhooks) OldestUndispatched(ctx context.Context) (time.Duration, error) {
	var at []time.Time
	err := w.db.WithContext(ctx).Raw("SELECT created_at FROM webhook_events WHERE seq > " + cursorSQL + " ORDER BY seq LIMIT 1").Scan(&at).Error
	if err != nil {
		return 0, webhooksUnavailable("oldest undispatched event", err)
	}
	if len(at) == 0 {
		return 0, nil
	}
	return max(0, time.Since(at[0])), nil
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
