package order

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Relay queues the tasks of accepted orders in batches, off the request
// path: Sync and ExpireAt append to memory and return at once, and a loop
// sends whatever has gathered as one order:expire-batch and one
// order:sync-batch task. While one send is in flight the next batch
// gathers, so an idle api sends at once and a busy one sends few, large
// tasks (no timer, no linger).
//
// Nothing is lost if the process dies with a batch in memory: the order and
// its outbox entry were written by the accept script, and the worker's
// reconciler queues outbox entries older than its grace period. An order
// leaves the outbox only when its sync task ran, and a batch's sync task is
// sent only after its expiry task was: so an order never reaches MySQL
// without its payment timeout queued.
//
// Group tasks (SettleAt, SyncGroup) are rare and go straight through.
type Relay struct {
	next *AsynqTasks
	log  *slog.Logger

	mu      sync.Mutex
	syncs   []syncPayload
	expires []expireItem
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
}

type expireItem struct {
	No string
	At time.Time
}

// maxRelayBatch bounds one task's orders; maxRelayBacklog bounds what waits
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

// Sync queues the recording of order no (fence 0: its first persistence).
func (r *Relay) Sync(_ context.Context, no string, fence int64) error {
	r.mu.Lock()
	r.syncs = append(r.syncs, syncPayload{No: no, Fence: fence})
	r.trim()
	r.mu.Unlock()
	r.signal()
	return nil
}

// ExpireAt queues the payment timeout of order no.
func (r *Relay) ExpireAt(_ context.Context, no string, at time.Time) error {
	r.mu.Lock()
	r.expires = append(r.expires, expireItem{No: no, At: at})
	r.trim()
	r.mu.Unlock()
	r.signal()
	return nil
}

// SettleAt queues a group's settlement directly.
func (r *Relay) SettleAt(ctx context.Context, gid string, at time.Time) error {
	return r.next.SettleAt(ctx, gid, at)
}

// SyncGroup queues a group's recording directly.
func (r *Relay) SyncGroup(ctx context.Context, gid string) error { return r.next.SyncGroup(ctx, gid) }

// trim drops the oldest waiting items beyond the backlog bound. r.mu held.
func (r *Relay) trim() {
	if n := len(r.syncs) - maxRelayBacklog; n > 0 {
		r.syncs = append(r.syncs[:0:0], r.syncs[n:]...)
		r.log.Error("task relay backlog full: dropped the oldest syncs; the reconciler will queue them from the outbox", "dropped", n)
	}
	if n := len(r.expires) - maxRelayBacklog; n > 0 {
		r.expires = append(r.expires[:0:0], r.expires[n:]...)
		r.log.Error("task relay backlog full: dropped the oldest expiries; the reconciler will queue them from the outbox", "dropped", n)
	}
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
	return len(r.syncs) > 0 || len(r.expires) > 0
}

// sendOne sends one batch; false when there was nothing to send or the send
// failed (the batch is back at the front).
func (r *Relay) sendOne(ctx context.Context) bool {
	r.mu.Lock()
	ne, ns := min(len(r.expires), maxRelayBatch), min(len(r.syncs), maxRelayBatch)
	expires, syncs := r.expires[:ne:ne], r.syncs[:ns:ns]
	r.expires, r.syncs = r.expires[ne:], r.syncs[ns:]
	r.mu.Unlock()
	if ne == 0 && ns == 0 {
		return false
	}
	putBack := func(e []expireItem, s []syncPayload) {
		r.mu.Lock()
		r.expires = append(e, r.expires...)
		r.syncs = append(s, r.syncs...)
		r.mu.Unlock()
	}
	if ne > 0 {
		if err := r.next.ExpireBatch(ctx, expires); err != nil {
			r.log.Warn("task relay: cannot queue expiries; retrying", "orders", ne, "err", err)
			putBack(expires, syncs)
			return false
		}
	}
	if ns > 0 {
		if err := r.next.SyncBatch(ctx, syncs); err != nil {
			r.log.Warn("task relay: cannot queue syncs; retrying", "orders", ns, "err", err)
			putBack(nil, syncs)
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
	left := len(r.syncs) + len(r.expires)
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
