package lock

import (
	"context"
	"time"
)

// A step under a lock. A lock taken only to run one short step inside
// Redis — the per-user order lock serialising a shopper's orders around one
// script — costs that step two scripts of its own, an obtain and a release.
// A caller's script can do better in two ways, both with lib_lock.lua (Lua
// links it):
//
//   - Elide: while nobody holds the lock, the script checks that
//     (lock_holders) and runs its step, in one atomic script that writes
//     nothing for the lock. A script is atomic: that excludes every other
//     holder exactly as obtain, step and release would. When the script
//     finds the lock held, nothing ran: Obtain it and release it with the
//     step (the speculative-then-locked shape of hardware lock elision; here
//     the conflict is known before anything runs).
//   - ReleaseIn: a holder's script runs its step only while the lock is
//     still held and releases it in the same atomic step (lock_release), so
//     the step cannot run after the lock was lost, and costs no release of
//     its own.
//
// On a Redis Cluster the step's keys must be in the lock's slot to share
// its script (a table named by the step's hash tag, InTable): Redis refuses
// a script over two slots (CROSSSLOT), and the step does not run. A caller
// whose step cannot share the lock's slot runs the step and the lock apart
// (Obtain, the step, Release). docs/locking.md, "A step under a
// lock", has the reasoning and the measurements.

// Ref is one mutex as a caller's script sees it (lib_lock.lua reads it with
// lock_ref): Keys and Args go into the script's KEYS and ARGV, in this
// order.
type Ref struct {
	// Keys are the lock's key and its waiting marker's; for a lock in a
	// table (InTable), the table's hash twice.
	Keys [2]string
	// Args are its field in the table ('' for a lock with keys of its
	// own), the holder's value ('' for a lock nobody took: Elide), and its
	// release channel ('' for Elide's: a lock nobody took is checked, never
	// released, and the channel is one unique string less for Redis to
	// make per call).
	Args [3]string
}

// Elision is a step about to run under a free mutex without taking it
// (Client.Elide): its Ref, for the step's script, and the lock's metrics.
type Elision struct {
	Ref
	obs observer
}

// Elide prepares a step that a caller's script runs under key's mutex
// without taking it: the script finds with lib_lock.lua's lock_holders
// that nobody holds the lock and runs its step, all in one script (see
// above). ok is false when the step must take the lock the usual way
// (Obtain, then ReleaseIn): this process holds or waits for key (its turn
// comes first), or key or opts are invalid (Obtain says why). Nothing is
// sent to Redis. On a Redis Cluster the step's keys must share the lock's
// slot (a table named by the step's hash tag, InTable): Redis refuses a
// script whose keys are in two slots (CROSSSLOT), and nothing runs.
func (c *Client) Elide(key string, opts ...Option) (e Elision, ok bool) {
	o, err := c.check(key, time.Millisecond, opts)
	if err != nil || c.gates.has(gateKeyOf(key, o)) {
		return Elision{}, false
	}
	ref := refOf(keysFor(c.cfg.Prefix, key, o), "")
	ref.Args[2] = "" // no release: no channel
	return Elision{Ref: ref, obs: c.cfg.observer("mutex", o)}, true
}

// Checked records what the elided step's script found: the lock free (the
// step ran: flashsale_lock_elided_total) or held (nothing ran; counted as
// contended, as a failed obtain is).
func (e Elision) Checked(free bool) {
	if free {
		e.obs.elided()
	} else {
		e.obs.contended()
	}
}

// refOf is the Ref of the mutex at k held with value.
func refOf(k mutexKeys, value string) Ref {
	waiting := k.waiting
	if k.inTable() {
		waiting = k.lock
	}
	return Ref{Keys: [2]string{k.lock, waiting}, Args: [3]string{k.field, value, k.channel}}
}

// ReleaseIn releases l through a caller's own script: run gets l's Ref,
// must release the lock in its script with lib_lock.lua's lock_release —
// running its step only if that found the lock still held, atomically —
// and returns lock_release's code for it: 0 not held, 1 released, 2
// released and waiters woken. The watchdog stops before run is called.
//
// It returns run's error (the script may have run, or not; the lock is
// then released in the background, owner-checked, or expires), or
// ErrNotHeld when the code says the lock was no longer held, or it was
// known lost (run is not called then). A local waiter is not handed the
// lock directly, as Release may: it obtains it in Redis after the script.
// Call it once, instead of Release. Only a mutex can: other kinds give an
// error wrapping ErrInvalid, and the lock is released. On a Redis Cluster
// run's keys must share the lock's slot, as Elide's.
func (l *Lock) ReleaseIn(ctx context.Context, run func(Ref) (int64, error)) error {
	if l == nil {
		return invalidf("release of a nil lock")
	}
	if run == nil {
		_ = l.Release(ctx)
		return invalidf("ReleaseIn: nil run")
	}
	if !l.released.CompareAndSwap(false, true) {
		return ErrNotHeld
	}
	defer l.lease.obs.held(l.since)
	co, ok := l.hold.(*cohort)
	if !ok {
		_ = l.hold.release(ctx, l)
		return invalidf("ReleaseIn: only a mutex runs a caller's release")
	}
	return co.releaseIn(ctx, l, run)
}

// releaseIn is ReleaseIn for a mutex holder.
func (co *cohort) releaseIn(ctx context.Context, h *Lock, run func(Ref) (int64, error)) error {
	if h.isLost() {
		_ = co.release(ctx, h)
		return ErrNotHeld
	}
	yield := false
	defer func() { co.leaveGate(grant{yield: yield}) }()
	if err := co.lease.stop(ctx); err != nil {
		return err
	}
	code, err := run(refOf(co.ops.keys, co.ops.value))
	if err != nil {
		go co.client.releaseValue(co.ops.keys, co.ops.value)
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return err
	}
	if code == 0 {
		co.lease.markLost()
		return ErrNotHeld
	}
	yield = code == 2
	return nil
}
