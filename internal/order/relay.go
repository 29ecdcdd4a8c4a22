package order

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Relay queues the tasks of accepted orders in batches, off the request
// path: Accepted, Sync and ExpireAt append to memory and return at once,
// and a loop sends whatever has gathered as order:expire-batch tasks and
// then one order:sync-batch task. While one send is in flight the next
// batch gathers, so an idle api sends at once and a busy one sends few,
// large tasks (no timer, no linger).
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
	next *AsynqTasks
	log  *slog.Logger

	mu      sync.Mutex
	items   []relayItem
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

// relayItem is one order's waiting tasks: its payment timeout if PayBy is
// set, its sync (with Fence) if Sync.
type relayItem struct {
	No    string
	Fence int64
	PayBy time.Time
	Sync  bool
}

// maxRelayBatch bounds one send's orders; maxRelayBacklog bounds what waits
// in memory while Redis refuses the sends (beyond it the oldest are dropped
// to the reconciler, which finds them in the outbox).
const (
	maxRelayBatch   = 1000
	maxRelayBacklog = 200_000
)

// NewRelay returns a relay sending through next; Close flushes and stops it.
func NewRelay(next *AsynqTasks, log *slog.Logger) *Relay {
	r := &Relay{next: next, log: log, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go r.loop()
	return r
}

// Accepted queues a new order's payment timeout and first persistence.
func (r *Relay) Accepted(_ context.Context, no string, payBy time.Time) error {
	r.add(relayItem{No: no, PayBy: payBy, Sync: true})
	return nil
}

// Sync queues the recording of order no (a status change passes its fence).
func (r *Relay) Sync(_ context.Context, no string, fence int64) error {
	r.add(relayItem{No: no, Fence: fence, Sync: true})
	return nil
}

// ExpireAt queues the payment timeout of order no.
func (r *Relay) ExpireAt(_ context.Context, no string, at time.Time) error {
	r.add(relayItem{No: no, PayBy: at})
	return nil
}

// SettleAt queues a group's settlement directly.
func (r *Relay) SettleAt(ctx context.Context, gid string, at time.Time) error {
	return r.next.SettleAt(ctx, gid, at)
}

// SyncGroup queues a group's recording directly.
func (r *Relay) SyncGroup(ctx context.Context, gid string) error { return r.next.SyncGroup(ctx, gid) }

// add appends it, dropping the oldest items beyond the backlog bound.
func (r *Relay) add(it relayItem) {
	r.mu.Lock()
	r.items = append(r.items, it)
	if n := len(r.items) - maxRelayBacklog; n > 0 {
		r.items = append(r.items[:0:0], r.items[n:]...)
		r.log.Error("task relay backlog full: dropped the oldest orders' tasks; the reconciler will queue them from the outbox", "dropped", n)
	}
	r.mu.Unlock()
	r.signal()
}

func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Relay) loop() {
	defer close(r.stopped)
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-r.wake:
		case <-r.stop:
			r.drain(5 * time.Second)
			return
		}
		for r.sendOne(context.Background()) {
		}
		if r.pending() {
			// A send failed: wait, then try again (Redis is back soon, or
			// the reconciler takes over for what is in the outbox).
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 2*time.Second)
				r.signal()
			case <-r.stop:
				r.drain(5 * time.Second)
				return
			}
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

func (r *Relay) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items) > 0
}

// sendOne sends one batch: its expiries, then its syncs. It returns false
// when there was nothing to send or the send failed (what was not sent is
// back at the front).
func (r *Relay) sendOne(ctx context.Context) bool {
	r.mu.Lock()
	n := min(len(r.items), maxRelayBatch)
	batch := r.items[:n:n]
	r.items = r.items[n:]
	r.mu.Unlock()
	if n == 0 {
		return false
	}
	putBack := func(b []relayItem) {
		r.mu.Lock()
		r.items = append(b, r.items...)
		r.mu.Unlock()
	}
	var expires []relayItem
	var syncs []syncPayload
	for _, it := range batch {
		if !it.PayBy.IsZero() {
			expires = append(expires, it)
		}
		if it.Sync {
			syncs = append(syncs, syncPayload{No: it.No, Fence: it.Fence})
		}
	}
	if len(expires) > 0 {
		if err := r.next.ExpireBatch(ctx, expires); err != nil {
			r.log.Warn("task relay: cannot queue expiries; retrying", "orders", len(expires), "err", err)
			putBack(batch)
			return false
		}
	}
	if len(syncs) > 0 {
		if err := r.next.SyncBatch(ctx, syncs); err != nil {
			r.log.Warn("task relay: cannot queue syncs; retrying", "orders", len(syncs), "err", err)
			var left []relayItem // the expiries went: only the syncs again
			for _, it := range batch {
				if it.Sync {
					left = append(left, relayItem{No: it.No, Fence: it.Fence, Sync: true})
				}
			}
			putBack(left)
			return false
		}
	}
	return true
}

// drain sends what is left, for up to timeout.
func (r *Relay) drain(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil && r.sendOne(ctx) {
	}
	r.mu.Lock()
	left := len(r.items)
	r.mu.Unlock()
	if left > 0 {
		r.log.Warn("task relay closed with tasks unsent; the reconciler will queue them from the outbox", "left", left)
	}
}

// Close sends what is waiting (for up to 5s) and stops the relay.
func (r *Relay) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.stopped
}
