package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// leaseOps is what a lock kind gives the shared lease machinery: the two
// owner-checked operations on its Redis state.
type leaseOps interface {
	// refresh sets the lock's ttl if the owner still holds it: (false, nil)
	// means the lock is gone or someone else's.
	refresh(ctx context.Context, ttl time.Duration) (bool, error)
	// release deletes the lock if the owner still holds it.
	release(ctx context.Context) (bool, error)
}

// Lock is a held lock. Its methods are safe for concurrent use.
//
// While it is held a watchdog renews it every ttl/3 (unless WithoutRenewal).
// When the watchdog learns the lock is gone, or cannot reach Redis before the
// lock's validity ends, Lost is closed: from then on the holder must stop
// acting on the protected resource, and its fencing token lets the resource
// reject it if it does not.
type Lock struct {
	key      string
	token    string
	fence    int64
	ttl      time.Duration
	opts     options
	ops      leaseOps
	acquired time.Time // when the obtaining command was sent (monotonic)

	// validFor is how long after acquired the holder may trust the lock: the
	// last confirmed renewal's send time plus ttl minus clock drift. Nanoseconds.
	validFor atomic.Int64

	released atomic.Bool // a Release succeeded
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the watchdog has exited
	endOnce  sync.Once
	onEnd    func() // frees local waiters of this key; called once
}

// newLease builds a held lock whose obtaining command was sent at sent, and
// starts its watchdog.
func newLease(key, token string, fence int64, ttl time.Duration, sent time.Time, o options, ops leaseOps, onEnd func()) *Lock {
	l := &Lock{
		key: key, token: token, fence: fence, ttl: ttl, opts: o, ops: ops,
		acquired: sent,
		lost:     make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		onEnd:    onEnd,
	}
	l.validFor.Store(int64(ttl - drift(ttl)))
	go l.watch()
	return l
}

// Key returns the name the lock was obtained under.
func (l *Lock) Key() string { return l.key }

// Fence returns the lock's fencing token: strictly greater than the token of
// every earlier holder of the same key. Pass it to the protected resource,
// which must refuse writes carrying a smaller token than it has seen.
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel that is closed when the lock is known to be lost
// before Release: it expired, was deleted or taken over, or Redis could not be
// reached to renew it in time. It stays open after a successful Release.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Release stops the watchdog, waits for any renewal in flight, and deletes the
// lock if this holder still owns it. It returns ErrNotHeld when the lock had
// expired, been taken, been lost, or been released already; an error wrapping
// ErrUnavailable when Redis could not be reached (the lock then expires on its
// own within its ttl, as renewal has stopped).
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return invalidf("release of a nil lock")
	}
	if l.released.Load() {
		return ErrNotHeld
	}
	l.stopOnce.Do(func() { close(l.stop) })
	defer l.end()
	select {
	case <-l.done:
	case <-ctx.Done():
		return canceled(ctx.Err())
	}
	ok, err := l.ops.release(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return canceled(ctx.Err())
		}
		return unavailable("release", err)
	}
	if !ok {
		l.markLost()
		return ErrNotHeld
	}
	if l.isLost() {
		// The key was still ours and is now deleted, but exclusivity was not
		// guaranteed for the whole hold: report it.
		return ErrNotHeld
	}
	l.released.Store(true)
	return nil
}

func (l *Lock) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

func (l *Lock) markLost() {
	l.lostOnce.Do(func() { close(l.lost) })
	l.end()
}

func (l *Lock) end() {
	l.endOnce.Do(func() {
		if l.onEnd != nil {
			l.onEnd()
		}
	})
}

// validUntil is the local monotonic instant after which the lock may have expired.
func (l *Lock) validUntil() time.Time {
	return l.acquired.Add(time.Duration(l.validFor.Load()))
}

// drift is the safety margin for clock rate differences between this process and
// Redis, and for the time a reply takes to come back (as Redlock uses).
func drift(ttl time.Duration) time.Duration {
	d := ttl/100 + 2*time.Millisecond
	if d > ttl/2 {
		d = ttl / 2
	}
	return d
}

// watch is the watchdog: it renews the lock every ttl/3 until Release stops it,
// and closes Lost when the lock is gone or its validity runs out unrenewed.
func (l *Lock) watch() {
	defer close(l.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	sleep := func(d time.Duration) bool { // false when stopped
		timer.Reset(d)
		select {
		case <-l.stop:
			return false
		case <-timer.C:
			return true
		}
	}
	<-timer.C

	if l.opts.noRenewal {
		if sleep(time.Until(l.validUntil())) {
			l.markLost()
		}
		return
	}

	interval := l.ttl / 3
	lastSent := l.acquired
	for {
		if !sleep(time.Until(lastSent.Add(interval))) {
			return
		}
		ttl := l.ttl
		if l.opts.maxHold > 0 {
			left := l.opts.maxHold - time.Since(l.acquired)
			if left < time.Millisecond {
				// Hold cap reached: stop renewing and let the lock lapse.
				if sleep(time.Until(l.validUntil())) {
					l.markLost()
				}
				return
			}
			ttl = min(ttl, left)
		}
		for {
			sent := time.Now()
			ok, err := l.refreshBy(l.validUntil(), ttl)
			if err == nil && !ok {
				l.markLost()
				return
			}
			if err == nil {
				l.validFor.Store(int64(sent.Sub(l.acquired) + ttl - drift(ttl)))
				lastSent = sent
				break
			}
			if !time.Now().Before(l.validUntil()) {
				l.markLost()
				return
			}
			if !sleep(min(interval/4, 50*time.Millisecond)) {
				return
			}
		}
	}
}

// refreshBy runs one renewal that must answer before deadline. The call runs in
// its own goroutine so a client that ignores context deadlines (go-redis without
// ContextTimeoutEnabled) cannot hold the watchdog past the lock's validity; a
// late answer is discarded, and a late renewal that still lands is harmless
// because it is owner-checked.
func (l *Lock) refreshBy(deadline time.Time, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type result struct {
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ok, err := l.ops.refresh(ctx, ttl)
		ch <- result{ok, err}
	}()
	select {
	case r := <-ch:
		return r.ok, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
