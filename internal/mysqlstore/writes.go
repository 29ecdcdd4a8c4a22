package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// WriteOptions tune how Orders batches its writes. The zero value gives
// the defaults in the comments.
//
// Why a batch's size is steered and not fixed (issue 39): a fixed batch
// retried whole after a timeout never gets smaller, so a server that has
// become slower per row than the batch's rows fit in the timeout (a big
// table on a slow engine, a slow disk, a lock) writes nothing ever again,
// while each timed-out statement it left running makes the next slower.
// Here a batch that ran out of time is cut down and sent again, a smaller
// one each time, down to a single row, and one that was slow shrinks the
// next: persistence keeps moving at whatever pace the server has.
type WriteOptions struct {
	// Target is how long one statement should take. The batch size grows
	// (by Max/20 rows) after a full batch that took under half of it, and
	// shrinks to what would have taken Target after one that took longer.
	// Default 1s: well under Timeout, and short enough that what else the
	// server runs one at a time (the embedded SQL server) waits little.
	Target time.Duration
	// Timeout bounds one statement. One that runs out is killed on the
	// server (KILL QUERY: a statement whose client gave up would otherwise
	// run on beside its retry) and its batch sent again in half the size;
	// a single row that runs out fails its writer with ErrUnavailable.
	// Default 30s.
	Timeout time.Duration
	// Max bounds a batch's rows, and is the first batch size. Default 500
	// (16 placeholders a row, well under MySQL's 65,535).
	Max int
	// Currency is the orders' currency (PAYMENT_CURRENCY, ISO 4217), as
	// their events report it. Default "cny", PAYMENT_CURRENCY's default.
	Currency string
	// SerialCommits says the SQL server commits one transaction at a time
	// (embedded memory mode): the worker's outbox is then read by a cursor
	// (Webhooks.SerialCommits).
	SerialCommits bool
}

func (o WriteOptions) withDefaults() WriteOptions {
	if o.Target <= 0 {
		o.Target = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Max <= 0 {
		o.Max = maxWriteBatch
	}
	if o.Currency == "" {
		o.Currency = defaultCurrency
	}
	return o
}

// pace is the batch size, steered by how long statements take
// (WriteOptions.Target). Only the batching loop's goroutine changes it.
type pace struct {
	size        atomic.Int64
	max, step   int
	target      time.Duration
	lastTook    atomic.Int64 // ns, of the latest statement (tests, metrics)
	timeouts    atomic.Int64 // statements that ran out of time
	statements  atomic.Int64 // statements sent
	splitRounds atomic.Int64 // batches sent again smaller after a timeout
}

func newPace(o WriteOptions) *pace {
	p := &pace{max: o.Max, step: max(1, o.Max/20), target: o.Target}
	p.size.Store(int64(o.Max))
	return p
}

// next is how many rows the next statement takes.
func (p *pace) next() int { return int(p.size.Load()) }

// wrote adjusts the size after a statement of n rows that took d; full
// says n was the size (more were waiting), the only case in which a fast
// statement says the size could be larger.
func (p *pace) wrote(n int, d time.Duration, full bool) {
	p.statements.Add(1)
	p.lastTook.Store(int64(d))
	size := int(p.size.Load())
	switch {
	case d > p.target:
		// What would have taken Target at this statement's pace, and
		// smaller than now in any case.
		fit := int(int64(n) * int64(p.target) / int64(d))
		size = max(1, min(size-1, fit))
	case full && d < p.target/2:
		size = min(p.max, size+p.step)
	}
	p.size.Store(int64(size))
}

// ranOut halves the size after a statement of n rows ran out of time.
func (p *pace) ranOut(n int) {
	p.statements.Add(1)
	p.timeouts.Add(1)
	p.size.Store(int64(max(1, min(int(p.size.Load()), n)/2)))
}

// send is the orders' batching loop's Send: it drops the writes whose
// callers left, writes up to the pace's size of the rest in one statement
// and puts the others back, ahead of what came since. A statement that ran
// out of time (not the loop's own end: Close's drain) is sent again in
// half the size; a single row that did is answered with the error.
func (s *Orders) send(ctx context.Context, b []*orderWrite) ([]*orderWrite, error) {
	b = answerLeft(b)
	if len(b) == 0 {
		return nil, nil
	}
	n := min(len(b), s.pace.next())
	batch, rest := b[:n], b[n:]
	started := time.Now()
	err := s.writeBatch(ctx, batch)
	took := time.Since(started)
	switch {
	case err == nil:
		s.pace.wrote(n, took, len(rest) > 0)
	case errors.Is(err, errStatementTimeout) && ctx.Err() == nil && n > 1:
		s.pace.ranOut(n)
		s.pace.splitRounds.Add(1)
		return b, err // all back: the loop waits its backoff, then sends half
	case errors.Is(err, errStatementTimeout):
		s.pace.ranOut(n)
	}
	for _, w := range batch {
		w.err = err
		close(w.done)
	}
	return rest, nil // a failed batch's writers retry (the worker's task, with backoff)
}

// answerLeft answers the writes whose callers' contexts ended, with their
// context's error, and returns the others. A caller that left retries its
// orders (a sync task that ran out of time runs again), so writing its
// rows as well would write them twice: under a backlog, every retry added
// a copy of its batch to the queue, and the queue grew faster than it was
// written.
func answerLeft(b []*orderWrite) []*orderWrite {
	kept := b[:0]
	for _, w := range b {
		if err := w.ctx.Err(); err != nil {
			w.err = err
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	clear(b[len(kept):])
	return kept
}

// errStatementTimeout marks a statement that ran out of
// WriteOptions.Timeout (the loop's own context still live).
var errStatementTimeout = errors.New("mysqlstore: statement timed out")

// exec runs fn in one transaction on a connection of its own within
// WriteOptions.Timeout (a batch's rows and their events: one transaction,
// so the time and the halving cover both). A statement still running when
// it runs out is killed on the server (KILL QUERY, from another
// connection, waiting at most killWait), the transaction rolls back, and
// the error wraps errStatementTimeout.
func (s *Orders) exec(ctx context.Context, fn func(tx *gorm.DB) error) error {
	sctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var connID int64
	err := s.db.WithContext(sctx).Connection(func(conn *gorm.DB) error {
		if err := conn.Raw("SELECT CONNECTION_ID()").Scan(&connID).Error; err != nil {
			return err
		}
		return conn.Transaction(fn)
	})
	if err == nil || sctx.Err() == nil || ctx.Err() != nil {
		return err
	}
	if connID != 0 {
		kctx, kcancel := context.WithTimeout(context.Background(), killWait)
		defer kcancel()
		_ = s.db.WithContext(kctx).Exec(fmt.Sprintf("KILL QUERY %d", connID)).Error // best effort: a server that does not answer ran nothing
	}
	return fmt.Errorf("%w (%v): %w", errStatementTimeout, s.opts.Timeout, err)
}

// execDirect runs query with args on tx's connection, as tx.Exec would
// but without gorm: the driver gets the same text and the same arguments.
// gorm's Exec builds the statement anew from its text (clause.Expr.Build
// walks it, and copies every argument into a list of its own with a type
// switch each): for the orders' statement of a batch of 500, 16
// arguments an order, that was 1.2–1.4 µs and 16 allocations an order of
// the worker (BenchmarkExecDirect); the events' statement, 8 an event,
// paid the same way.
func execDirect(tx *gorm.DB, query string, args ...any) error {
	_, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, query, args...)
	return err
}

// killWait bounds a KILL QUERY of a statement that ran out of time.
const killWait = 2 * time.Second

// defaultCurrency is PAYMENT_CURRENCY's default, the orders' events'
// currency when none is set.
const defaultCurrency = "cny"
