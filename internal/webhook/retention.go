package webhook

import (
	"context"
	"time"
)

// DefaultRetention is how long the outbox's dispatched events and the
// delivery log's attempts are kept (WEBHOOK_RETENTION): 30 days, what
// Svix keeps and a recovery can reach back.
const DefaultRetention = 720 * time.Hour

// PruneStore deletes what the retention lets go (mysqlstore.Webhooks), each
// call one bounded statement.
type PruneStore interface {
	// PruneEvents deletes up to about limit dispatched events appended
	// before before (never an undispatched one), and says how many.
	PruneEvents(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneAttempts deletes up to about limit attempts made before before,
	// and says how many.
	PruneAttempts(ctx context.Context, before time.Time, limit int) (int, error)
}

// Retention prunes the outbox and the delivery log of what is older than
// Keep: run by the dispatcher's leader, in small statements, so that
// neither table grows without bound and no statement holds its locks long.
//
// What it never prunes: an event not yet dispatched (every enabled
// endpoint subscribed to it is owed it); a dispatched event's row is owed
// to nobody (its deliveries' tasks carry its body), only to a redelivery
// or a recovery, which reach back Keep at most. Keep must be longer than
// the retry schedule (config checks it), so that a delivery still on its
// schedule keeps its whole log: whether its endpoint answered a 2xx since
// the delivery began decides whether it is disabled.
type Retention struct {
	store PruneStore
	// Keep is how long rows are kept. Default DefaultRetention.
	Keep time.Duration
	// Batch bounds the rows of one statement. Default 2000.
	Batch int
	// MaxStatements bounds one Prune's statements of each table (it goes
	// on at the next). Default 50.
	MaxStatements int
	// Pause is the wait between two statements, leaving MySQL to the
	// others. Default 20ms.
	Pause time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// NewRetention returns a Retention keeping keep (0: the default).
func NewRetention(store PruneStore, keep time.Duration) *Retention {
	if keep <= 0 {
		keep = DefaultRetention
	}
	return &Retention{store: store, Keep: keep, Batch: 2000, MaxStatements: 50, Pause: 20 * time.Millisecond, Now: time.Now}
}

// Prune deletes what is older than Keep, Batch rows a statement, until a
// statement finds less than a batch or MaxStatements ran, and says how
// many events and attempts it deleted.
func (r *Retention) Prune(ctx context.Context) (events, attempts int, err error) {
	before := r.Now().Add(-r.Keep)
	for _, t := range []struct {
		prune func(context.Context, time.Time, int) (int, error)
		n     *int
	}{{r.store.PruneEvents, &events}, {r.store.PruneAttempts, &attempts}} {
		for range r.MaxStatements {
			n, err := t.prune(ctx, before, r.Batch)
			*t.n += n
			if err != nil {
				return events, attempts, err
			}
			if n < r.Batch/2 { // the oldest rows hold few old enough: done for now
				break
			}
			select {
			case <-ctx.Done():
				return events, attempts, ctx.Err()
			case <-time.After(r.Pause):
			}
		}
	}
	return events, attempts, nil
}
