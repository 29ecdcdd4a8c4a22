package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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

	// serial: see SerialCommits. cursor is the last seq dispatched, read
	// the seqs of the last Undispatched read's events.
	serial bool
	mu     sync.Mutex
	cursor uint64
	read   map[string]uint64
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

// SerialCommits makes this the dispatcher's outbox on a SQL server that
// commits one transaction at a time (embedded memory mode: the turns of
// internal/embedded): there an event's seq is taken in commit order, so the
// events not yet dispatched are those after the last seq dispatched, kept
// here, and MarkDispatched writes nothing. go-mysql-server rewrites a
// table's row in time that grows with the table (an UPDATE of 20 outbox
// rows took 670 ms at 2,000 rows), and the dispatcher's marks of 500 held
// the one turn every order write waits for past a minute: a 1,000-unit
// sale was not persisted 20 s after it sold out (CI, issue 41). On MySQL
// transactions commit out of seq order (an auto-increment is taken at the
// insert), and the per-row mark is what is right. In this mode the
// dispatched events are not pruned (an in-memory database lives as long as
// its process) and no repair finds them (the Redis beside it is in the
// same process: lost with it).
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
	Dispatched bool      `gorm:"column:dispatched"`
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
// event appended before (the same id: a change recorded again) is kept as
// it was. Producers call it inside their own transaction; its error should
// abort that transaction.
func AppendTx(tx *gorm.DB, events ...webhook.Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now().UTC()
	var q strings.Builder
	q.WriteString("INSERT INTO webhook_events (id, type, subject, sequence, activity_id, occurred_at, body, created_at) VALUES ")
	args := make([]any, 0, 8*len(events))
	for i, e := range events {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, e.ID, string(e.Type), e.Subject, e.Sequence, e.ActivityID, e.At.UTC(), string(e.Body), now)
	}
	// Only a duplicate id is let through (ON DUPLICATE KEY rather than
	// INSERT IGNORE, which would turn any other error into a warning).
	q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	return tx.Exec(q.String(), args...).Error
}

// Append appends events in a transaction of their own: for a caller with
// no change of its own to record with them (the tests, a benchmark).
func (w *Webhooks) Append(ctx context.Context, events ...webhook.Event) error {
	if err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return AppendTx(tx, events...) }); err != nil {
		return webhooksUnavailable("append events", err)
	}
	return nil
}

const eventColumns = "id, type, subject, sequence, activity_id, occurred_at, body"

// Undispatched returns up to limit events not yet dispatched, in the
// order they were appended.
func (w *Webhooks) Undispatched(ctx context.Context, limit int) ([]webhook.Event, error) {
	if !w.serial {
		return w.events(ctx, "undispatched events", "SELECT "+eventColumns+" FROM webhook_events WHERE dispatched = 0 ORDER BY seq LIMIT ?", limit)
	}
	w.mu.Lock()
	after := w.cursor
	w.mu.Unlock()
	var rows []EventRow
	err := w.db.WithContext(ctx).Raw("SELECT seq, "+eventColumns+" FROM webhook_events WHERE seq > ? ORDER BY seq LIMIT ?", after, limit).
		Scan(&rows).Error
	if err != nil {
		return nil, webhooksUnavailable("undispatched events", err)
	}
	out := make([]webhook.Event, len(rows))
	read := make(map[string]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.event()
		read[r.ID] = r.Seq
	}
	w.mu.Lock()
	w.read = read
	w.mu.Unlock()
	return out, nil
}

// undispatchedWhere is the condition of the events not yet dispatched.
func (w *Webhooks) undispatchedWhere() (string, []any) {
	if !w.serial {
		return "dispatched = 0", nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return "seq > ?", []any{w.cursor}
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

// MarkDispatched marks events dispatched.
func (w *Webhooks) MarkDispatched(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if w.serial {
		w.mu.Lock()
		for _, id := range ids {
			w.cursor = max(w.cursor, w.read[id])
		}
		w.mu.Unlock()
		return nil
	}
	// dispatched_at is the repair's (webhook.Repairer): when the tasks went
	// to Redis, which may lose them.
	err := w.db.WithContext(ctx).Exec("UPDATE webhook_events SET dispatched = 1, dispatched_at = ? WHERE id IN ?",
		time.Now().UTC(), ids).Error
	if err != nil {
		return webhooksUnavailable("mark events dispatched", err)
	}
	return nil
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
	where, args := w.undispatchedWhere()
	if err := w.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM webhook_events WHERE "+where, args...).Scan(&n).Error; err != nil {
		return 0, webhooksUnavailable("count undispatched events", err)
	}
	return n, nil
}

// OldestUndispatched is how long the oldest event waiting for the
// dispatcher has waited (0 when none waits).
func (w *Webhooks) OldestUndispatched(ctx context.Context) (time.Duration, error) {
	var at []time.Time
	where, args := w.undispatchedWhere()
	err := w.db.WithContext(ctx).Raw("SELECT created_at FROM webhook_events WHERE "+where+" ORDER BY seq LIMIT 1", args...).Scan(&at).Error
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
