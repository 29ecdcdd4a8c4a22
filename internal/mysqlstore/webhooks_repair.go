package mysqlstore

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/internal/webhook"
)

var _ webhook.RepairLog = (*Webhooks)(nil)

// DispatchedSince reads up to limit events after the cursor afterSeq (0:
// from the first dispatched at or after since), by seq, and returns those
// dispatched at or after since and before until, and the cursor of the last read (afterSeq
// when none was: the end): the first of them by the dispatch-time index (migrations/
// 00015), then by the primary key, so that each page is a range of it and
// not a sort of the whole window. An event dispatched before since but
// appended after the first is skipped by the filter.
func (w *Webhooks) DispatchedSince(ctx context.Context, since, until time.Time, afterSeq uint64, limit int) ([]webhook.Dispatched, uint64, error) {
	if w.serial {
		return nil, afterSeq, nil // see SerialCommits
	}
	since = since.UTC()
	if afterSeq == 0 {
		var first []*uint64
		err := w.db.WithContext(ctx).Raw("SELECT MIN(seq) FROM webhook_events WHERE dispatched_at >= ?", since).Scan(&first).Error
		if err != nil {
			return nil, 0, webhooksUnavailable("events dispatched since", err)
		}
		if len(first) == 0 || first[0] == nil || *first[0] == 0 {
			return nil, 0, nil
		}
		afterSeq = *first[0] - 1
	}
	var rows []struct {
		EventRow
		DispatchedAt time.Time `gorm:"column:dispatched_at"`
	}
	err := w.db.WithContext(ctx).Raw("SELECT seq, "+eventColumns+", dispatched_at FROM webhook_events "+
		"WHERE seq > ? AND dispatched = 1 ORDER BY seq LIMIT ?", afterSeq, limit).Scan(&rows).Error
	if err != nil {
		return nil, 0, webhooksUnavailable("events dispatched since", err)
	}
	out := make([]webhook.Dispatched, 0, len(rows))
	for _, r := range rows {
		afterSeq = r.Seq
		if r.DispatchedAt.Before(since) || !r.DispatchedAt.Before(until) {
			continue
		}
		out = append(out, webhook.Dispatched{Event: r.event(), DispatchedAt: r.DispatchedAt.UTC()})
	}
	return out, afterSeq, nil
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
