package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/tracing"
)

// Relay queues the tasks of accepted orders in batches, off the request
// path: ExpireThenSync, Sync and ExpireAt remember the task and return at once,
// and a batch.Loop sends whatever has gathered as order:expire-batch tasks
// and then one order:sync-batch task. It lingers relayLinger after the
// first order for more, and while one send is in flight the next batch
// gathers, so even a moderately busy api sends few, large tasks: every task
// costs Redis the same whatever it carries (asynq's enqueue, dequeue, lease
// and completion scripts), and at one send per round trip a few thousand
// orders a second made tasks of two or three orders, whose asynq work cost
// Redis more than the orders' own (docs/benchmarks.md, "Current figures:
// the per-user lock at no extra round trip", the relay's linger).
//
// Nothing is lost if the process dies with a batch in memory: the order and
// its outbox entry were written by the accept script, and the worker's
// reconciler queues outbox entries older than its grace period. An order
// leaves the outbox only when its sync task ran. An accepted order's expiry
// and sync are one item of one queue, sent in the same batch, expiry first:
// so an order never reaches MySQL without its payment timeout queued.
// (With two queues, a send could take an order's sync before its expiry
// was appended; a crash then left it unpaid and holding stock for ever.)
//
// Group tasks (SettleAt, SyncGroup) are rare and go straight through.
type Relay struct {
	next *Queue
	log  *slog.Logger
	loop *batch.Loop[relayItem]
}

var (
	_ order.Tasks    = (*Relay)(nil)
	_ order.Buffered = (*Relay)(nil)
)

// Buffered says the relay's order tasks only wait in memory: they return
// at once, whatever the context (order.Buffered); after Close each is sent
// on a context of its own (add).
func (r *Relay) Buffered() {}

// relayItem is one order's waiting tasks: its payment timeout if PayBy is
// set, its sync (with Fence) if Sync.
type relayItem struct {
	No    string
	Fence int64
	PayBy time.Time
	Sync  bool
	Trace string // the request's traceparent, when traced
}

// maxRelayBatch bounds one send's orders; maxRelayBacklog bounds what waits
// in memory while Redis refuses the sends (beyond it the oldest are dropped
// to the reconciler, which finds them in the outbox).
//
// relayLinger delays an order's tasks by at most 50 ms: the payment timeout
// is scheduled for its pay-by time anyway, and the sync reaches MySQL 50 ms
// later at worst, against a persistence lag measured in hundreds of ms.
// Nothing is less safe for it: until the sync task runs, the order's outbox
// entry stands, and the reconciler queues it if the api dies meanwhile.
// Why 50 and not 10 (until 2026-11-30): the worker's cost is mostly per
// task, not per order — asynq's dequeue and completion, the orders' read,
// the persisted mark: each a round trip and its wake-ups — and at a
// launch's 9k–20k orders a second a task holds the rate times the linger:
// about 90–200 orders at 10 ms, 450–1,000 at 50 (docs/benchmarks.md, "The
// relay's linger at a launch": the worker −9% an order, run for run).
const (
	relayLinger     = 50 * time.Millisecond
	maxRelayBatch   = 1000
	maxRelayBacklog = 200_000
)

// NewRelay returns a relay sending through next; Close flushes and stops it.
func NewRelay(next *Queue, log *slog.Logger) *Relay {
	r := &Relay{next: next, log: log}
	r.loop = batch.New(r.send, batch.Options{
		Max: maxRelayBatch, Backlog: maxRelayBacklog, Linger: relayLinger,
		Dropped: func(n int) {
			log.Error("task relay backlog full: dropped the oldest orders' tasks; the reconciler will queue them from the outbox", "dropped", n)
		},
	})
	return r
}

// ExpireThenSync queues a new order's payment timeout and first
// persistence.
func (r *Relay) ExpireThenSync(ctx context.Context, no string, payBy time.Time) error {
	return r.add(relayItem{No: no, PayBy: payBy, Sync: true, Trace: tracing.Carrier(ctx)})
}

// Sync queues the recording of order no (a status change passes its fence).
func (r *Relay) Sync(ctx context.Context, no string, fence int64) error {
	return r.add(relayItem{No: no, Fence: fence, Sync: true, Trace: tracing.Carrier(ctx)})
}

// ExpireAt queues the payment timeout of order no.
func (r *Relay) ExpireAt(_ context.Context, no string, at time.Time) error {
	return r.add(relayItem{No: no, PayBy: at})
}

// SettleAt queues a group's settlement directly.
func (r *Relay) SettleAt(ctx context.Context, gid string, at time.Time) error {
	return r.next.SettleAt(ctx, gid, at)
}

// SyncGroup queues a group's recording directly.
func (r *Relay) SyncGroup(ctx context.Context, gid string) error { return r.next.SyncGroup(ctx, gid) }

// add remembers it; after Close it is sent at once.
func (r *Relay) add(it relayItem) error {
	if r.loop.Add(it) {
		return nil
	}
	_, err := r.send(context.Background(), []relayItem{it})
	return err
}

// send sends one batch: its expiries, then its syncs. What failed comes back
// to be sent again: the whole batch if the expiries failed, only the syncs
// if they did.
func (r *Relay) send(ctx context.Context, b []relayItem) ([]relayItem, error) {
	var expires []relayItem
	var syncs []syncPayload
	for _, it := range b {
		if !it.PayBy.IsZero() {
			expires = append(expires, it)
		}
		if it.Sync {
			syncs = append(syncs, syncPayload{No: it.No, Fence: it.Fence, Trace: it.Trace})
		}
	}
	if len(expires) > 0 {
		if err := r.next.ExpireBatch(ctx, expires); err != nil {
			r.log.Warn("task relay: cannot queue expiries; retrying", "orders", len(expires), "err", err)
			return b, err
		}
	}
	if len(syncs) > 0 {
		if err := r.next.SyncBatch(ctx, syncs); err != nil {
			r.log.Warn("task relay: cannot queue syncs; retrying", "orders", len(syncs), "err", err)
			var again []relayItem // the expiries went: only the syncs again
			for _, it := range b {
				if it.Sync {
					again = append(again, relayItem{No: it.No, Fence: it.Fence, Sync: true, Trace: it.Trace})
				}
			}
			return again, err
		}
	}
	return nil, nil
}

// Close sends what is waiting (for up to 5s) and stops the relay; tasks
// added later are sent at once.
func (r *Relay) Close() {
	if left := r.loop.Close(); len(left) > 0 {
		r.log.Warn("task relay closed with tasks unsent; the reconciler will queue them from the outbox", "left", len(left))
	}
}
