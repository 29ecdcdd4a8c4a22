package lock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
)

// Lock elision: a mutex taken only to run one step inside Redis — a Guard
// and a Finish, nothing in between — need not be taken at all when it is
// free. A script is atomic: checking in one script that nobody holds the
// lock, and then running the guard and the finish,
// excludes every other holder exactly as obtain, finish and release would,
// and writes nothing for the lock. When the lock is held, the step waits
// its turn like any Obtain and runs with the release
// (ReleaseWith). So the lock keeps its meaning for whoever holds it across
// round trips, and a step that finds it free pays one script, not two.
// (The name is the hardware one: speculative lock elision runs a critical
// section without the lock and falls back to it on conflict; here the
// conflict is known before anything runs.)

// Deferred is a mutex a caller needs for one step in Redis (RunWith): it is
// not taken before then, and not at all when it is free then. Get one from
// Defer or DeferGuarded; it is used once.
type Deferred struct {
	c     *Client
	key   string
	ttl   time.Duration
	opts  []Option
	o     options
	guard *guardCall
	used  atomic.Bool
}

// Defer prepares key's mutex for a step RunWith runs under it, taken with
// ttl and opts if it must be taken (the lock is held when the step
// comes). Nothing is sent to Redis yet.
func (c *Client) Defer(key string, ttl time.Duration, opts ...Option) (*Deferred, error) {
	o, err := c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	return &Deferred{c: c, key: key, ttl: ttl, opts: opts, o: o}, nil
}

// DeferGuarded is Defer with a guard run with the step, once, before its
// finish (or before the obtain, when the lock must be taken): if g
// refuses, nothing else runs and RunWith returns a *Refused.
func (c *Client) DeferGuarded(key string, ttl time.Duration, g *Guard, keys []string, args []any, opts ...Option) (*Deferred, error) {
	if g == nil {
		return nil, invalidf("nil guard")
	}
	d, err := c.Defer(key, ttl, opts...)
	if err != nil {
		return nil, err
	}
	d.guard = &guardCall{g: g, keys: keys, args: args}
	return d, nil
}

// Fence is 0: an elided hold mints no fencing token. A caller that needs
// fences obtains the lock.
func (d *Deferred) Fence() int64 { return 0 }

// Release gives up a Deferred that RunWith was not called on: nothing was
// taken, so there is nothing to send. It is nil, and RunWith afterwards
// refuses (ErrNotHeld).
func (d *Deferred) Release(context.Context) error {
	d.used.Store(true)
	return nil
}

// RunWith runs the guard (if any) and f, with keys and args, as the
// lock's holder would: with nobody else holding the lock. When nobody
// holds the lock in Redis and nobody in this process holds or waits for
// it, that is one script through run,
// and the lock is never written. Otherwise RunWith obtains the lock as
// Obtain does — in turn behind its waiters, for as long as ctx allows —
// with the guard, and runs f with the release (Lock.ReleaseWith). Under
// Redis Cluster it always takes that second way (the steps' keys are in
// other slots than the lock's).
//
// It returns f's reply; a *Refused when the guard refused (f did not
// run); a *WaitError when the lock was held and the wait for it failed
// (nothing ran); ReleaseWith's errors (f may have run when the script
// failed, as there). Call it once. run must send to the Redis of the lock
// client: the check of the lock runs where run sends it.
//
// A script sent again after a lost answer (go-redis resends a pipeline
// after a read timeout) runs the guard again: a guard that counts (a rate
// limit) is charged twice, and may refuse the second run although the
// first ran f. A caller whose finish leaves a trace it can look up (an
// order record) checks for it on a refusal; an obtain sent again runs its
// guard again too.
func (d *Deferred) RunWith(ctx context.Context, run Runner, f *Finish, keys []string, args ...any) (any, error) {
	if d == nil || f == nil || run == nil {
		return nil, invalidf("RunWith: nil lock, finish or runner")
	}
	if !d.used.CompareAndSwap(false, true) {
		return nil, ErrNotHeld
	}
	c := d.c
	if !c.cluster() && !c.gates.has(gateKeyOf(d.key, d.o)) {
		reply, busy, err := d.elide(ctx, run, f, keys, args)
		if !busy {
			return reply, err
		}
		// Held: the obtain's first attempt counts it as contended.
	}
	l, err := c.obtain(ctx, d.key, d.ttl, d.guard, d.opts)
	if err != nil {
		var refused *Refused
		if errors.As(err, &refused) {
			return nil, err
		}
		return nil, &WaitError{Err: err}
	}
	return l.ReleaseWith(ctx, run, f, keys, args...)
}

// WaitError is RunWith's error when the lock was held and waiting for it
// failed — ctx ended, WithMaxWait ran out, Redis could not be reached —
// before anything ran. Its Err is Obtain's error.
type WaitError struct{ Err error }

func (e *WaitError) Error() string { return "lock: waiting to run a step: " + e.Err.Error() }

// Unwrap gives Obtain's error.
func (e *WaitError) Unwrap() error { return e.Err }

// elide runs the elided script: f's reply, or busy when the lock is held
// (nothing ran).
func (d *Deferred) elide(ctx context.Context, run Runner, f *Finish, keys []string, args []any) (reply any, busy bool, err error) {
	var g *Guard
	var gkeys []string
	var gargs []any
	if d.guard != nil {
		g, gkeys, gargs = d.guard.g, d.guard.keys, d.guard.args
	}
	e := f.elision(g)
	k := keysFor(d.c.cfg.Prefix, d.key, d.o)
	// The guard's keys and arguments, the finish's, the lock's (copies of
	// the first: the caller's slices are not appended to).
	rkeys := make([]string, 0, len(gkeys)+len(keys)+1)
	rkeys = append(append(rkeys, gkeys...), keys...)
	rargs := make([]any, 0, len(gargs)+len(args)+3)
	rargs = append(append(rargs, gargs...), args...)
	rkeys = append(rkeys, k.lock)
	script := e.plain
	if k.inTable() {
		script = e.table
		rargs = append(rargs, k.field)
	}
	rargs = append(rargs, len(gkeys), len(gargs))
	res, err := run.RunMerged(ctx, script, "", rkeys, rargs...).Slice()
	if err != nil {
		if ended(ctx) {
			return nil, false, canceled(ctxErr(ctx))
		}
		return nil, false, fmt.Errorf("lock: elided step: %w", err)
	}
	if len(res) != 2 {
		return nil, false, fmt.Errorf("lock: elided step returned %v", res)
	}
	switch code, _ := res[0].(int64); code {
	case 0:
		return nil, true, nil
	case 1:
		d.c.cfg.observer("mutex", d.o).elided()
		reply, err := finishReply(res[1])
		return reply, false, err
	case 2:
		return nil, false, &Refused{Reply: res[1]}
	}
	return nil, false, fmt.Errorf("lock: elided step returned %v", res)
}

// elision is a finish's elided scripts with one guard (or none).
type elision struct {
	plain, table *luascript.Merged
}

// nilGuard stands for "no guard" among a finish's elisions.
var nilGuard = &Guard{}

// elision returns f's elided scripts with g, built on first use.
func (f *Finish) elision(g *Guard) *elision {
	k := g
	if k == nil {
		k = nilGuard
	}
	if e, ok := f.elided.Load(k); ok {
		return e.(*elision)
	}
	guard := noGuard
	if g != nil {
		guard = batchFunction("guard", g.body)
	}
	finish := batchFunction("finish", f.body)
	e, _ := f.elided.LoadOrStore(k, &elision{
		plain: luascript.NewMerged(guard + finish + mustSource("elide")),
		table: luascript.NewMerged(guard + finish + mustSource("table_elide")),
	})
	return e.(*elision)
}
