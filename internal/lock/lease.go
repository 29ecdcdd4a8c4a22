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
//
// The watchdog is a timer, not a goroutine: a hold costs no goroutine until a
// renewal is due, which keeps short holds cheap.
type Lock struct {
	key      string
	fence    int64
	ttl      time.Duration
	opts     options
	ops      leaseOps
	acquired time.Time // when the obtaining command was sent (monotonic)

	// validFor is how long after acquired the holder may trust the lock: the
	// last confirmed renewal's send time plus ttl minus clock drift. Nanoseconds.
	validFor atomic.Int64

	mu       sync.Mutex
	timer    *time.Timer   // fires renew (or expire, without renewal)
	stopped  bool          // Release has begun: no more renewals
	renewing chan struct{} // closed when the renewal in flight ends; nil if none

	released atomic.Bool // a Release succeeded
	lost     chan struct{}
	lostOnce sync.Once
	endOnce  sync.Once
	onEnd    func() // frees local waiters of this key; called once
}

// newLease builds a held lock whose obtaining command was sent at sent, and
// arms its watchdog.
func newLease(key string, fence int64, ttl time.Duration, sent time.Time, o options, ops leaseOps, onEnd func()) *Lock {
	l := &Lock{
		key: key, fence: fence, ttl: ttl, opts: o, ops: ops,
		acquired: sent,
		lost:     make(chan struct{}),
		onEnd:    onEnd,
	}
	l.validFor.Store(int64(ttl - drift(ttl)))
	l.mu.Lock()
	if o.noRenewal {
		l.timer = time.AfterFunc(time.Until(l.validUntil()), l.expire)
	} else {
		l.timer = time.AfterFunc(ttl/3, l.renew)
	}
	l.mu.Unlock()
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
	defer l.end()
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	inFlight := l.renewing
	l.mu.Unlock()
	if inFlight != nil {
		select {
		case <-inFlight:
		case <-ctx.Done():
			return canceled(ctx.Err())
		}
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

// expire runs when an unrenewed lock's validity ends.
func (l *Lock) expire() {
	l.mu.Lock()
	stopped := l.stopped
	l.mu.Unlock()
	if !stopped {
		l.markLost()
	}
}

// renew is the watchdog's timer callback: one renewal attempt, then it arms
// the timer for the next one (ttl/3 after this one was sent, or sooner to
// retry a failure) or closes Lost.
func (l *Lock) renew() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	done := make(chan struct{})
	l.renewing = done
	l.mu.Unlock()

	next, outcome := l.renewOnce()

	l.mu.Lock()
	l.renewing = nil
	close(done)
	stopped := l.stopped
	if !stopped {
		switch outcome {
		case renewAgain:
			l.timer.Reset(next)
		case capReached:
			l.timer = time.AfterFunc(time.Until(l.validUntil()), l.expire)
		}
	}
	l.mu.Unlock()
	if outcome == renewLost && !stopped {
		l.markLost()
	}
}

type renewOutcome int

const (
	renewAgain renewOutcome = iota // run the next renewal after the returned delay
	capReached                     // WithMaxHold reached: let the lock lapse
	renewLost                      // the lock is gone or its validity ran out
)

// renewOnce makes one renewal attempt and says what comes next.
func (l *Lock) renewOnce() (time.Duration, renewOutcome) {
	interval := l.ttl / 3
	ttl := l.ttl
	last := false // this renewal reaches the hold cap
	if l.opts.maxHold > 0 {
		left := l.opts.maxHold - time.Since(l.acquired)
		if left < time.Millisecond {
			return 0, capReached
		}
		if left <= ttl {
			ttl, last = left, true
		}
	}
	sent := time.Now()
	ok, err := l.refreshBy(l.validUntil(), ttl)
	switch {
	case err == nil && !ok:
		return 0, renewLost
	case err == nil:
		l.validFor.Store(int64(sent.Sub(l.acquired) + ttl - drift(ttl)))
		if last {
			return 0, capReached
		}
		return time.Until(sent.Add(interval)), renewAgain
	case !time.Now().Before(l.validUntil()):
		return 0, renewLost
	default: // Redis unreachable for now: retry soon, until validity ends
		return min(interval/4, 50*time.Millisecond), renewAgain
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
