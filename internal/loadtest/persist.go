package loadtest

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/stock"
)

// Lag is how long accepted orders took to reach MySQL.
type Lag struct {
	N             int
	P50, P99, Max time.Duration
	// Slow counts orders over 2 s, accepted between SlowFrom and SlowTo
	// after the first order: a tail spread over the run is a backlog, one
	// bunched in a moment is a stall (a retry, a GC pause, a reconnect).
	Slow             int
	SlowFrom, SlowTo time.Duration
}

// String is the lag for people.
func (l Lag) String() string {
	s := fmt.Sprintf("p50 %v, p99 %v, max %v over %d orders", ms(l.P50), ms(l.P99), ms(l.Max), l.N)
	if l.Slow > 0 {
		s += fmt.Sprintf(" (%d over 2 s, accepted %v–%v into the run)", l.Slow,
			l.SlowFrom.Round(100*time.Millisecond), l.SlowTo.Round(100*time.Millisecond))
	}
	return s
}

// WaitPersisted waits until MySQL holds as many orders of the activity as
// Redis accepted and the outbox is empty; false if timeout came first.
func WaitPersisted(ctx context.Context, rdb redis.UniversalClient, db *sql.DB, activity int64, timeout time.Duration) (bool, error) {
	keeper := stock.New(rdb, stock.Config{})
	deadline := time.Now().Add(timeout)
	for {
		live, err := keeper.Read(ctx, activity) // every shard's acceptances and outbox
		if err != nil {
			return false, fmt.Errorf("loadtest: accepted count: %w", err)
		}
		accepted, backlog := live.Accepted, live.Unrecorded
		var recorded int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE activity_id = ?", activity).Scan(&recorded); err != nil {
			return false, err
		}
		if recorded == accepted && backlog == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PersistLag measures, for the activity's orders that never changed status,
// the time from acceptance (Redis time) to their row's write.
func PersistLag(ctx context.Context, db *sql.DB, activity int64) (Lag, error) {
	// Times as microsecond offsets: a DSN given with -mysql-dsn may lack
	// parseTime.
	rows, err := db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM orders WHERE activity_id = ?), created_at),
		TIMESTAMPDIFF(MICROSECOND, created_at, updated_at) FROM orders WHERE activity_id = ? AND fence = 0`, activity, activity)
	if err != nil {
		return Lag{}, err
	}
	defer rows.Close()
	type order struct{ at, lag time.Duration } // at: after the first order
	var all []order
	for rows.Next() {
		var at, us int64
		if err := rows.Scan(&at, &us); err != nil {
			return Lag{}, err
		}
		o := order{at: time.Duration(at) * time.Microsecond, lag: time.Duration(us) * time.Microsecond}
		all = append(all, o)
	}
	if err := rows.Err(); err != nil || len(all) == 0 {
		return Lag{}, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lag < all[j].lag })
	at := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))].lag }
	l := Lag{N: len(all), P50: at(0.50), P99: at(0.99), Max: all[len(all)-1].lag}
	for _, o := range all {
		if o.lag <= 2*time.Second {
			continue
		}
		off := o.at
		if l.Slow == 0 || off < l.SlowFrom {
			l.SlowFrom = off
		}
		if off > l.SlowTo {
			l.SlowTo = off
		}
		l.Slow++
	}
	return l, nil
}
