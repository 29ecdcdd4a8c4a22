package lock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// leaseOps is what a lock kind gives the shared lease machinery: the
// owner-checked renewal of its Redis (or MySQL) state.
type leaseOps interface {
	// refresh sets the lock's ttl if the owner still holds it: (false, nil)
	// means the lock is gone or someone else's.
	refresh(ctx context.Context, ttl time.Duration) (bool, error)
}

// lease is one hold of a lock in its store, kept alive by a watchdog. It may
// serve several holders in turn (a mutex handing over inside a process, or a
// reentrant owner's nested holds); each holding has its own Lost channel.
//
// The watchdog is a timer, not a goroutine: a hold costs no goroutine until a
// renewal is due, which keeps short holds cheap.
type lease struct {
	ops      leaseOps
	obs      observer
	ttl      time.Duration
	maxHold  time.Duration // WithMaxHold's; 0: none
	acquired time.Time     // when the obtaining command was sent (monotonic)
	onLost   func()        // called once, outside any lock, when the lease is lost

	// validFor is how long after acquired the lease may be trusted: the last
	// confirmed renewal's send time plus ttl minus drift. Nanoseconds.
	validFor atomic.Int64

	mu       sync.Mutex
	renewT   *time.Timer   // fires renew; nil without renewal
	expireT  *time.Timer   // fires expire at validUntil; reset by each renewal
	stopped  bool          // stop has begun: no more renewals, never lost
	renewing chan struct{} // closed when the renewal in flight ends; nil if none
	dead     bool          // lost
	lost     chan struct{} // the current holding's Lost channel
}

// startLease arms the watchdog of a lease whose obtaining command was sent at
// sent. Two timers: one renews every ttl/3, the other closes Lost the moment
// the validity runs out unrenewed, whenever the renewals happen to run.
func startLease(ops leaseOps, obs observer, ttl time.Duration, o options, sent time.Time, onLost func()) *lease {
	ls := &lease{ops: ops, obs: obs, ttl: ttl, maxHold: o.maxHold, acquired: sent, onLost: onLost, lost: make(chan struct{})}
	ls.validFor.Store(int64(ttl - drift(ttl)))
	ls.mu.Lock()
	ls.expireT = time.AfterFunc(time.Until(ls.validUntil()), ls.expire)
	if !o.noRenewal {
		ls.renewT = time.AfterFunc(time.Until(sent.Add(ttl/3)), ls.renew)
	}
	ls.mu.Unlock()
	return ls
}

// nextHolding starts a new holding of a live lease and returns its Lost
// channel; false if the lease is lost or stopping.
func (ls *lease) nextHolding() (chan struct{}, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.dead || ls.stopped {
		return nil, false
	}
	ls.lost = make(chan struct{})
	return ls.lost, true
}

// stop ends the watchdog and waits for a renewal in flight, so that no
// renewal can land after the caller releases the lock. After stop the lease
// is never marked lost by its timers: a holder that releases decides that
// itself from the release's answer.
func (ls *lease) stop(ctx context.Context) error {
	ls.mu.Lock()
	ls.stopped = true
	ls.expireT.Stop()
	if ls.renewT != nil {
		ls.renewT.Stop()
	}
	inFlight := ls.renewing
	ls.mu.Unlock()
	if inFlight != nil {
		select {
		case <-inFlight:
		case <-ctx.Done():
			return canceled(ctx.Err())
		}
	}
	return nil
}

func (ls *lease) isDead() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.dead
}

// markLost closes the current holding's Lost and tells the lock kind, once.
// The store's answer proved the lock gone, so it applies even after stop.
func (ls *lease) markLost() {
	ls.mu.Lock()
	first := ls.loseLocked()
	ls.mu.Unlock()
	if first && ls.onLost != nil {
		ls.onLost()
	}
}

// loseLocked marks the lease lost; ls.mu is held. It reports whether this
// call did it.
func (ls *lease) loseLocked() bool {
	if ls.dead {
		return false
	}
	ls.dead = true
	// A lost lease is never renewed again, whatever a late renewal answer
	// says: the store's key lapses within its ttl.
	ls.expireT.Stop()
	if ls.renewT != nil {
		ls.renewT.Stop()
	}
	ls.obs.lostOne() // before close: whoever Lost wakes sees it counted
	close(ls.lost)
	return true
}

// loseUnlessStopped is markLost for the watchdog: deciding under ls.mu means
// a Release that has stopped the lease can never see Lost close afterwards.
func (ls *lease) loseUnlessStopped(stillValid func() bool) {
	ls.mu.Lock()
	first := false
	if !ls.stopped && !stillValid() {
		first = ls.loseLocked()
	}
	ls.mu.Unlock()
	if first && ls.onLost != nil {
		ls.onLost()
	}
}

// validUntil is the local monotonic instant after which the lock may have expired.
func (ls *lease) validUntil() time.Time {
	return ls.acquired.Add(time.Duration(ls.validFor.Load()))
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

// expire runs at validUntil. A renewal confirmed in the meantime has moved
// validUntil on; otherwise the lease is lost.
func (ls *lease) expire() {
	ls.loseUnlessStopped(func() bool { return time.Now().Before(ls.validUntil()) })
}

// renew is the renewal timer's callback: one attempt, then it arms the timer
// for the next one (ttl/3 after this one was sent, or sooner to retry a
// failure). A renewal that finds the lock gone marks the lease lost; one that
// cannot reach the store leaves that to expire.
func (ls *lease) renew() {
	ls.mu.Lock()
	if ls.stopped {
		ls.mu.Unlock()
		return
	}
	done := make(chan struct{})
	ls.renewing = done
	ls.mu.Unlock()

	next, outcome := ls.renewOnce()

	ls.mu.Lock()
	ls.renewing = nil
	close(done)
	if !ls.stopped && !ls.dead { // expire may have won the race with this renewal
		switch outcome {
		case renewAgain:
			ls.renewT.Reset(next)
			ls.expireT.Reset(time.Until(ls.validUntil()))
		case capReached:
			ls.expireT.Reset(time.Until(ls.validUntil()))
		}
	}
	ls.mu.Unlock()
	if outcome == renewLost {
		ls.loseUnlessStopped(func() bool { return false })
	}
}

type renewOutcome int

const (
	renewAgain renewOutcome = iota // run the next renewal after the returned delay
	capReached                     // WithMaxHold reached: let the lock lapse
	renewLost                      // the store says the lock is gone
)

// renewOnce makes one renewal attempt and says what comes next.
func (ls *lease) renewOnce() (time.Duration, renewOutcome) {
	interval := ls.ttl / 3
	ttl := ls.ttl
	last := false // this renewal reaches the hold cap
	if ls.maxHold > 0 {
		left := ls.maxHold - time.Since(ls.acquired)
		if left < time.Millisecond {
			return 0, capReached
		}
		if left <= ttl {
			ttl, last = left, true
		}
	}
	sent := time.Now()
	ok, err := ls.refreshBy(ls.validUntil(), ttl)
	ls.obs.renewed(err == nil && ok)
	switch {
	case err == nil && !ok:
		return 0, renewLost
	case err == nil:
		ls.validFor.Store(int64(sent.Sub(ls.acquired) + ttl - drift(ttl)))
		if last {
			return 0, capReached
		}
		return time.Until(sent.Add(interval)), renewAgain
	default: // unreachable for now: retry soon; expire closes Lost on time
		return min(interval/4, 50*time.Millisecond), renewAgain
	}
}

// refreshBy runs one renewal that must answer before deadline. The call runs in
// its own goroutine so a client that ignores context deadlines (go-redis without
// ContextTimeoutEnabled) cannot hold the watchdog past the lock's validity; a
// late answer is discarded, and a late renewal that still lands is harmless
// because it is owner-checked.
func (ls *lease) refreshBy(deadline time.Time, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type result struct {
		ok  bool
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ok, err := ls.ops.refresh(ctx, ttl)
		ch <- result{ok, err}
	}()
	select {
	case r := <-ch:
		return r.ok, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Lock is one holding of a lock, of any kind. Its methods are safe for
// concurrent use.
//
// While it is held a watchdog renews it every ttl/3 (unless WithoutRenewal).
// When the watchdog learns the lock is gone, or cannot reach the store before
// the lock's validity ends, Lost is closed: from then on the holder must stop
// acting on the protected resource, and its fencing token lets the resource
// reject it if it does not.
type Lock struct {
	since    time.Time // when this holding began
	key      string
	owner    string // the reentrant lock's owner; "" for other kinds
	token    string // the reentrant hold's nonce; "" for other kinds
	fence    int64
	lost     chan struct{}
	lease    *lease
	hold     holding     // the lock kind's holder, which releases it
	released atomic.Bool // Release was called
}

// holding is a lock kind's holder of a Lock: what its Release runs. A
// mutex's (cohort) can also be released by a caller's script (ReleaseIn). An
// interface, not func fields: a method value bound to its holder cost an
// allocation per lock, two for a mutex.
type holding interface {
	release(ctx context.Context, l *Lock) error
}

// Key returns the name the lock was obtained under.
func (l *Lock) Key() string { return l.key }

// Owner returns the owner id of a reentrant lock ("" for other kinds). Put
// it in a context with WithOwner to obtain the lock again as its owner.
func (l *Lock) Owner() string { return l.owner }

// Fence returns the lock's fencing token: strictly greater than the token of
// every earlier holder of the same key. Pass it to the protected resource,
// which must refuse writes carrying a smaller token than it has seen. It is
// 0 for a mutex obtained WithoutFence.
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel that is closed when the lock is known to be lost
// before Release: it expired, was deleted or taken over, or its store could
// not be reached to renew it in time. It stays open after a successful Release.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Release gives the lock up: to the next waiter in this process, or by
// deleting it from its store if this holder still owns it, after stopping the
// watchdog and waiting for a renewal in flight. Call it once: it returns
// ErrNotHeld when the lock had expired, been taken, been lost, or when it was
// called before; an error wrapping ErrUnavailable when the store could not be
// reached (the lock then expires on its own within its ttl, as renewal has
// stopped).
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return invalidf("release of a nil lock")
	}
	if !l.released.CompareAndSwap(false, true) {
		return ErrNotHeld
	}
	defer l.lease.obs.held(l.since)
	return l.hold.release(ctx, l)
}

func (l *Lock) isLost() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}
