package webhook

import (
	"context"
	"errors"
	"time"
)

// Deliveries live as tasks in Redis (internal/tasks), and Redis loses the
// last writes it was given when it is killed before its fsync
// (appendfsync everysec: about a second), failed over to a replica that
// had not yet received them, or cut off from its sentinels while it still
// took writes (all it took then is dropped at its resync). What is lost is
// always a suffix of its writes: the tasks queued in a window before the
// loss, while a task queued before it is there as it was then (taken
// again, or run again: a duplicate, which at least once allows). The
// outbox and the delivery log are MySQL's and survive. The Repairer finds
// the deliveries such a window may have taken and queues them again; the
// dispatcher's leader runs it when the Redis it queues into is another one
// than before (its run id changed: restarted, failed over) and when it
// begins to lead (docs/webhooks.md, "Redis lost what it was given").

// Key names one delivery: an event to an endpoint.
type Key struct {
	EndpointID int64
	EventID    string
}

// Holder tells the deliveries that tasks hold (tasks.WebhookQueue): queued,
// waiting for their time, or running.
type Holder interface {
	Held(ctx context.Context) (map[Key]bool, error)
}

// Dispatched is an event the dispatcher queued, and when.
type Dispatched struct {
	Event
	DispatchedAt time.Time
}

// Progress is how far one delivery went, by the delivery log's attempts
// (an admin's redeliveries apart).
type Progress struct {
	Attempts int // the last attempt's number; 0 none
	// Over says the delivery ended: delivered, or its last attempt failed.
	Over bool
}

// RepairLog is what a repair reads (mysqlstore.Webhooks).
type RepairLog interface {
	// DispatchedSince reads up to limit events appended after the cursor
	// after (0: from the first dispatched at or after since), oldest
	// first, and returns those dispatched at or after since and the cursor
	// of the last it read: after itself when it read none, the end.
	// Those dispatched at or after until are left out.
	DispatchedSince(ctx context.Context, since, until time.Time, after uint64, limit int) ([]Dispatched, uint64, error)
	// Progress returns the progress of endpoint's deliveries of eventIDs
	// that made an attempt (an event missing made none).
	Progress(ctx context.Context, endpointID int64, eventIDs []string) (map[string]Progress, error)
	// FailedSince returns the events whose delivery to endpoint made a
	// failed attempt at or after since and before until: its retry was
	// queued then.
	FailedSince(ctx context.Context, endpointID int64, since, until time.Time) ([]string, error)
}

// RepairPage is how many dispatched events a repair reads at a time.
const RepairPage = 500

// Repaired is what a repair found and queued again.
type Repaired struct {
	Since time.Time
	// Checked is how many deliveries it looked at (an event dispatched in
	// the window, to each enabled endpoint that subscribes to it; a retry
	// queued in it).
	Checked int
	// Held is how many of them a task held.
	Held int
	// Queued is how many it queued again: no task held them, and no
	// attempt had ended them.
	Queued int
}

// Repairer queues again the deliveries a loss of Redis took.
type Repairer struct {
	log       RepairLog
	outbox    Outbox
	endpoints Endpoints
	queue     Queue
	holder    Holder
	// Settle is how long a repair waits between reading what the tasks
	// hold and reading the delivery log: an attempt's log row is written in
	// the background, up to a batch's linger after its task ended, and a
	// delivery whose task ended and whose row is not yet there would be
	// queued again. Default 2s.
	Settle time.Duration
}

// NewRepairer returns a Repairer.
func NewRepairer(log RepairLog, outbox Outbox, endpoints Endpoints, queue Queue, holder Holder) *Repairer {
	return &Repairer{log: log, outbox: outbox, endpoints: endpoints, queue: queue, holder: holder, Settle: 2 * time.Second}
}

// Repair queues again every delivery whose task was queued at or after
// since and before the repair began (what the dispatcher queues meanwhile
// went to the Redis there is now) — an event dispatched then, to each enabled endpoint subscribed to
// it; a retry queued when an attempt failed then — that no task holds now
// and that no attempt ended: a first delivery with the whole schedule, a
// lost retry as the attempt it was to be, at once. The same ids and bodies
// as before: a delivery whose task ended between the reads (its log row
// not yet written) goes twice, which at least once allows and receivers
// deduplicate.
func (r *Repairer) Repair(ctx context.Context, since time.Time) (Repaired, error) {
	out := Repaired{Since: since}
	all, err := r.endpoints.Endpoints(ctx)
	if err != nil {
		return out, err
	}
	var eps []Endpoint
	for _, ep := range all {
		if ep.Enabled {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return out, nil
	}
	// What is queued once the tasks are being listed went to the Redis
	// there is now: the repair looks at what was queued before.
	until := time.Now()
	held, err := r.holder.Held(ctx)
	if err != nil {
		return out, err
	}
	select {
	case <-ctx.Done():
		return out, ctx.Err()
	case <-time.After(r.Settle):
	}
	// owed queues the deliveries of events (to ep) that no task holds and
	// no attempt ended; seen keeps a delivery from being looked at twice.
	seen := map[Key]bool{}
	owed := func(ep Endpoint, events []Dispatched) error {
		var ids []string
		for _, e := range events {
			if !seen[Key{ep.ID, e.ID}] {
				ids = append(ids, e.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		progress, err := r.log.Progress(ctx, ep.ID, ids)
		if err != nil {
			return err
		}
		var ds []Delivery
		for _, e := range events {
			k := Key{ep.ID, e.ID}
			if seen[k] {
				continue
			}
			seen[k] = true
			out.Checked++
			p := progress[e.ID]
			switch {
			case held[k]:
				out.Held++
			case !p.Over:
				ds = append(ds, Delivery{EndpointID: ep.ID, EventID: e.ID, Type: e.Type, Body: e.Body, Since: e.DispatchedAt,
					Attempt: p.Attempts + 1, Repair: true})
			}
		}
		if len(ds) == 0 {
			return nil
		}
		if err := r.queue.Deliver(ctx, ds); err != nil {
			return err
		}
		out.Queued += len(ds)
		return nil
	}
	var cursor uint64
	for {
		page, next, err := r.log.DispatchedSince(ctx, since, until, cursor, RepairPage)
		if err != nil {
			return out, err
		}
		for _, ep := range eps {
			var mine []Dispatched
			for _, e := range page {
				if ep.Subscribes(e.Type) {
					mine = append(mine, e)
				}
			}
			if err := owed(ep, mine); err != nil {
				return out, err
			}
		}
		if next == cursor {
			break
		}
		cursor = next
	}
	// Retries queued in the window, of events dispatched before it.
	for _, ep := range eps {
		ids, err := r.log.FailedSince(ctx, ep.ID, since, until)
		if err != nil {
			return out, err
		}
		var retried []Dispatched
		for _, id := range ids {
			if seen[Key{ep.ID, id}] {
				continue
			}
			e, err := r.outbox.Event(ctx, id)
			if errors.Is(err, ErrNotFound) {
				continue // pruned since: nothing to send
			}
			if err != nil {
				return out, err
			}
			retried = append(retried, Dispatched{Event: e, DispatchedAt: since})
		}
		if err := owed(ep, retried); err != nil {
			return out, err
		}
	}
	return out, nil
}
