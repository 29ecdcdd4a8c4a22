package webhook

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/internal/refusal"
)

// EventLog is the outbox read by time (mysqlstore.Webhooks): the
// recovery's pages.
type EventLog interface {
	// EventsSince returns up to limit events appended at or after since
	// and after the cursor after (0: from the first), oldest first, and
	// the cursor of the last.
	EventsSince(ctx context.Context, since time.Time, after uint64, limit int) ([]Event, uint64, error)
}

// RecoverPage is how many of the outbox's events a recovery reads at a
// time; each page's deliveries to the endpoint go as one task (its batch,
// named by its first event: the same page queued again while the first
// waits is refused).
const RecoverPage = 64

// Recovered is what a recovery queued.
type Recovered struct {
	EndpointID int64
	Since      time.Time
	// Events is how many events it queued for the endpoint (those since
	// that it subscribes to; a page still waiting from an earlier recovery
	// is counted but not queued twice).
	Events int
}

// Recover queues again, to endpoint id, every event appended since since
// that the endpoint subscribes to, oldest first (Svix's "recover": an
// endpoint enabled again after an outage gets what it missed). The
// endpoint must be enabled (ErrConflict), and since no older than the
// retention (ErrInvalid, field since: those events may be pruned already)
// nor in the future. Each delivery is a recovery's (the whole schedule,
// Since now), the same ids and bodies as before: a receiver deduplicates.
// Calling it again with the same since while the first's deliveries still
// wait queues none of them twice (their tasks are named by endpoint and
// first event); a since that splits the pages differently may send a
// page's events twice, which at least once allows.
func (s *Service) Recover(ctx context.Context, id int64, since time.Time) (Recovered, error) {
	now := s.cfg.Now()
	switch {
	case since.IsZero():
		return Recovered{}, refusal.OfField(ErrInvalid, "since", "since: required, an RFC 3339 time")
	case since.Before(now.Add(-s.cfg.Retention)):
		return Recovered{}, refusal.OfField(ErrInvalid, "since",
			"since: %s is older than the retention (WEBHOOK_RETENTION, %v): events before %s may be pruned; recover from then at the earliest",
			since.UTC().Format(time.RFC3339), s.cfg.Retention, now.Add(-s.cfg.Retention).UTC().Format(time.RFC3339))
	case since.After(now):
		return Recovered{}, refusal.OfField(ErrInvalid, "since", "since: %s is in the future", since.UTC().Format(time.RFC3339))
	}
	ep, err := s.endpoints.Endpoint(ctx, id)
	if err != nil {
		return Recovered{}, err
	}
	if !ep.Enabled {
		return Recovered{}, refusal.New(ErrConflict, "the endpoint is disabled: enable it first (PATCH {\"enabled\": true})")
	}
	out := Recovered{EndpointID: id, Since: since}
	var cursor uint64
	for {
		events, next, err := s.log.EventsSince(ctx, since, cursor, RecoverPage)
		if err != nil {
			return out, err
		}
		var ds []Delivery
		for _, e := range events {
			if ep.Subscribes(e.Type) {
				ds = append(ds, Delivery{EndpointID: id, EventID: e.ID, Type: e.Type, Body: e.Body, Since: now, Recovery: true})
			}
		}
		if len(ds) > 0 {
			if err := s.queue.Deliver(ctx, ds); err != nil {
				return out, err
			}
			out.Events += len(ds)
		}
		if len(events) < RecoverPage {
			return out, nil
		}
		cursor = next
	}
}
