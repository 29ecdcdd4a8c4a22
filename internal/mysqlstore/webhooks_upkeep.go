package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/flashsale/flashsale/internal/webhook"
)

// The webhooks' upkeep: the retention's prune, the recovery's read, the
// secrets sealed again (docs/webhooks.md, Upkeep).

// PruneEvents deletes up to about limit dispatched events appended before
// before, and says how many it deleted. One statement, bounded: it looks at
// the outbox's oldest limit rows by primary key (seq) and deletes among them
// the dispatched ones older than before, so it never scans past them and
// locks no more than they are. An undispatched event is never deleted: the
// enabled endpoints subscribed to it are still owed it. A dispatched one
// is owed nothing by its row: its deliveries' tasks carry its body.
func (w *Webhooks) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	if w.serial {
		return 0, nil // see SerialCommits
	}
	cursor, err := w.cursor(ctx)
	if err != nil {
		return 0, err
	}
	n, err := w.prune(ctx, "prune events", "webhook_events", "seq",
		fmt.Sprintf("seq <= %d AND created_at < ?", cursor), "created_at", before, limit)
	if err != nil || n > 0 {
		return n, err
	}
	// The dispatcher's passes go with their events (an event is appended
	// before it is dispatched: a pass before before dispatched only events
	// appended before it), the last one kept: it is the cursor.
	res := w.db.WithContext(ctx).Exec("DELETE FROM webhook_dispatches WHERE through_seq < ? AND dispatched_at < ? ORDER BY through_seq LIMIT ?",
		uint64(cursor), before.UTC(), limit)
	if res.Error != nil {
		return 0, webhooksUnavailable("prune dispatches", res.Error)
	}
	return 0, nil
}

// PruneAttempts deletes up to about limit delivery log rows of attempts
// made before before, in the same bounded way (the oldest limit rows by
// primary key), and says how many.
func (w *Webhooks) PruneAttempts(ctx context.Context, before time.Time, limit int) (int, error) {
	return w.prune(ctx, "prune attempts", "webhook_attempts", "id",
		"attempted_at < ?", "attempted_at", before, limit)
}

// prune deletes the rows matching cond (its one argument before) among the
// table's first limit rows by its primary key pk. The upper bound is found
// first among those rows (the last whose time column at is before before),
// so the DELETE is a range of the primary key no longer than limit rows.
func (w *Webhooks) prune(ctx context.Context, what, table, pk, cond, at string, before time.Time, limit int) (int, error) {
	before = before.UTC()
	var upto []uint64
	err := w.db.WithContext(ctx).Raw(fmt.Sprintf("SELECT COALESCE(MAX(h.%[1]s), 0) FROM "+
		"(SELECT %[1]s, %[3]s FROM %[2]s ORDER BY %[1]s LIMIT ?) h WHERE h.%[3]s < ?", pk, table, at), limit, before).Scan(&upto).Error
	if err != nil {
		return 0, webhooksUnavailable(what, err)
	}
	if len(upto) == 0 || upto[0] == 0 {
		return 0, nil
	}
	res := w.db.WithContext(ctx).Exec(fmt.Sprintf("DELETE FROM %s WHERE %s <= ? AND %s", table, pk, cond), upto[0], before)
	if res.Error != nil {
		return 0, webhooksUnavailable(what, res.Error)
	}
	return int(res.RowsAffected), nil
}

// EventsSince returns up to limit events appended at or after since with a
// seq above afterSeq, in the order they were appended, and the seq of the
// last (afterSeq when none): the recovery's pages. An order's
// order.accepted counts from the order's acceptance (its row's created_at:
// it is appended when the order is first written, after that). The first
// call (afterSeq 0) starts after the last seq dispatched before since:
// every event appended since is above it (seqs are commit order, and a pass
// dispatches committed events only), whatever table holds it.
func (w *Webhooks) EventsSince(ctx context.Context, since time.Time, afterSeq uint64, limit int) ([]webhook.Event, uint64, error) {
	since = since.UTC()
	if afterSeq == 0 {
		var before []uint64
		err := w.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches WHERE dispatched_at < ?", since).Scan(&before).Error
		if err != nil {
			return nil, 0, webhooksUnavailable("events since", err)
		}
		if len(before) > 0 {
			afterSeq = before[0]
		}
	}
	es, rows, err := w.readOutbox(ctx, "events since", "seq > ? AND created_at >= ?", []any{afterSeq, since},
		"o.event_seq > ? AND o.created_at >= ?", []any{afterSeq, since}, limit)
	if err != nil {
		return nil, 0, err
	}
	if len(rows) > 0 {
		afterSeq = rows[len(rows)-1].Seq
	}
	return es, afterSeq, nil
}

// ReencryptSecrets writes again, sealed under the current key, every
// endpoint's secrets that are not yet (stored as plaintext before
// WEBHOOK_SECRET_KEY was set, or under WEBHOOK_SECRET_KEY_OLD), one
// endpoint a transaction under its row lock, and says how many it wrote.
// With no key configured it writes nothing. `api encrypt-webhook-secrets`
// runs it.
func (w *Webhooks) ReencryptSecrets(ctx context.Context) (int, error) {
	if !w.box.encrypts() {
		return 0, nil
	}
	var ids []int64
	if err := w.db.WithContext(ctx).Raw("SELECT id FROM webhook_endpoints ORDER BY id").Scan(&ids).Error; err != nil {
		return 0, webhooksUnavailable("endpoints", err)
	}
	n := 0
	for _, id := range ids {
		err := w.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			e, current, err := w.endpointIn(tx.Clauses(clause.Locking{Strength: "UPDATE"}), id)
			if err != nil || current {
				return err
			}
			n++
			return tx.Exec("UPDATE webhook_endpoints SET secret = ?, previous_secret = ? WHERE id = ?",
				w.box.seal(colSecret, e.Secret), w.box.seal(colPreviousSecret, e.PreviousSecret), id).Error
		})
		if err != nil && !errors.Is(err, webhook.ErrNotFound) {
			return n, webhooksUnavailable(fmt.Sprintf("encrypt endpoint %d", id), err)
		}
	}
	return n, nil
}
