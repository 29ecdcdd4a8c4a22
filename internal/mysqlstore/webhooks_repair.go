package mysqlstore

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/internal/webhook"
)

var _ webhook.RepairLog = (*Webhooks)(nil)

// DispatchedSince reads up to limit events after the cursor afterSeq (0:
// from the first dispatched at or after since), by seq, and returns those
// dispatched at or after since and before until, and the cursor of the
// last read (afterSeq when none was: the end). An event's dispatch time is
// its pass's, the first of the dispatcher's passes (webhook_dispatches,
// migrations/00016) at or above its seq. The first event is found by the
// passes' time index; each page is then a range of the events' primary key
// and of the passes' (one pass dispatched at least one event, so limit
// passes cover limit events or all there are).
func (w *Webhooks) DispatchedSince(ctx context.Context, since, until time.Time, afterSeq uint64, limit int) ([]webhook.Dispatched, uint64, error) {
	if w.serial {
		return nil, afterSeq, nil // see SerialCommits
	}
	since = since.UTC()
	if afterSeq == 0 {
		// The first pass at or after since; the events after the pass
		// before it.
		var first []*uint64
		err := w.db.WithContext(ctx).Raw("SELECT MIN(through_seq) FROM webhook_dispatches WHERE dispatched_at >= ? AND through_seq > 0", since).Scan(&first).Error
		if err != nil {
			return nil, 0, webhooksUnavailable("events dispatched since", err)
		}
		if len(first) == 0 || first[0] == nil || *first[0] == 0 {
			return nil, 0, nil
		}
		var before []uint64
		err = w.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(through_seq), 0) FROM webhook_dispatches WHERE through_seq < ?", *first[0]).
			Scan(&before).Error
		if err != nil {
			return nil, 0, webhooksUnavailable("events dispatched since", err)
		}
		if len(before) > 0 {
			afterSeq = before[0]
		}
	}
	var passes []struct {
		Through      uint64    `gorm:"column:through_seq"`
		DispatchedAt time.Time `gorm:"column:dispatched_at"`
	}
	err := w.db.WithContext(ctx).Raw("SELECT through_seq, dispatched_at FROM webhook_dispatches WHERE through_seq > ? ORDER BY through_seq LIMIT ?",
		afterSeq, limit).Scan(&passes).Error
	if err != nil {
		return nil, 0, webhooksUnavailable("events dispatched since", err)
	}
	if len(passes) == 0 {
		return nil, afterSeq, nil
	}
	last := passes[len(passes)-1].Through
	es, rows, err := w.readOutbox(ctx, "events dispatched since", "seq > ? AND seq <= ?", []any{afterSeq, last},
		"o.event_seq > ? AND o.event_seq <= ?", []any{afterSeq, last}, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]webhook.Dispatched, 0, len(rows))
	p := 0
	for i, r := range rows {
		for passes[p].Through < r.Seq {
			p++
		}
		at := passes[p].DispatchedAt
		if at.Before(since) || !at.Before(until) {
			continue
		}
		out = append(out, webhook.Dispatched{Event: es[i], DispatchedAt: at.UTC()})
	}
	if len(rows) == limit {
		return out, rows[len(rows)-1].Seq, nil // a full page: more may follow in these passes
	}
	return out, last, nil // the events of every pass read (pruned ones too)
}

// Progress returns the progress of endpoint's deliveries of eventIDs that
// made an attempt, by the delivery log (an admin's redeliveries apart): the
// last attempt's number, and whether one ended the delivery.
func (w *Webhooks) Progress(ctx context.Context, endpointID int64, eventIDs []string) (map[string]webhook.Progress, error) {
	out := map[string]webhook.Progress{}
	if len(eventIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		EventID string `gorm:"column:event_id"`
		N       int    `gorm:"column:n"`
		Ended   bool   `gorm:"column:ended"`
	}
	err := w.db.WithContext(ctx).Raw("SELECT event_id, MAX(attempt) AS n, MAX(delivered OR is_last) AS ended FROM webhook_attempts "+
		"WHERE endpoint_id = ? AND event_id IN ? AND manual = 0 GROUP BY event_id", endpointID, eventIDs).Scan(&rows).Error
	if err != nil {
		return nil, webhooksUnavailable("deliveries' progress", err)
	}
	for _, r := range rows {
		out[r.EventID] = webhook.Progress{Attempts: r.N, Over: r.Ended}
	}
	return out, nil
}

// FailedSince returns the events whose delivery to endpoint made a failed
// attempt (not an admin's) at or after since and before until.
func (w *Webhooks) FailedSince(ctx context.Context, endpointID int64, since, until time.Time) ([]string, error) {
	var ids []string
	err := w.db.WithContext(ctx).Raw("SELECT DISTINCT event_id FROM webhook_attempts "+
		"WHERE endpoint_id = ? AND delivered = 0 AND attempted_at >= ? AND attempted_at < ? AND manual = 0",
		endpointID, since.UTC(), until.UTC()).Scan(&ids).Error
	if err != nil {
		return nil, webhooksUnavailable("failed attempts since", err)
	}
	return ids, nil
}
