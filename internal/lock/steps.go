package lock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
)

// Steps: a caller's own Lua, run by the mutex in the same script as its
// obtain (a Guard: ObtainGuarded) or its release (a Finish: ReleaseWith).
// A lock taken only to serialise one short Redis step costs that step's
// caller two round trips of its own (obtain, release) and two scripts in
// Redis; with a Guard and a Finish it costs none: the rate-limit check
// rides on the obtain, the protected step on the release. The lock is
// still a lock — owner token, ttl, watchdog, Lost, owner-checked release —
// and the Finish runs only while it is held.
//
// Both are merged scripts (internal/redisbatch): the obtains, or the
// releases, of concurrent holders in one pipeline run as one script, and a
// Finish written for a batch (NewBatchFinish) does its work for all of
// them at once — one read of what they share, one write of many fields.
// The frames are headed scripts of their own (scripts/guarded_obtain.lua,
// scripts/release_with.lua); the caller's Lua becomes a local function the
// frame calls, so one source serves fused and alone. Steps' keys must hash
// to the lock's Redis Cluster slot to be fused; under Redis Cluster the
// steps simply run by themselves, one after the other (not atomically).

// Guard is Lua run just before a mutex's first obtain attempt, in the same
// script. It returns nil (or false) to let the obtain go on; anything else
// refuses: the lock is not taken and ObtainGuarded returns a *Refused
// carrying that reply.
type Guard struct {
	body       string            // the batch function's body (NewBatchGuard)
	fused      *luascript.Merged // the guards, then the obtains
	tableFused *luascript.Merged // the same for locks in tables
	alone      *luascript.Merged
}

// Finish is Lua run by ReleaseWith in the same script as the release, only
// while the lock is held. Its reply is ReleaseWith's.
type Finish struct {
	body       string            // the batch function's body (NewBatchFinish)
	fused      *luascript.Merged // owner checks, the finish of the held, the releases
	tableFused *luascript.Merged // the same for locks in tables
	alone      *luascript.Merged
	elided     sync.Map // *Guard (nilGuard for none) → *elision: the finish run with the lock elided
}

// NewGuard compiles src (a whole script for one call, reading KEYS and
// ARGV: libraries included) into a guard.
func NewGuard(src string) *Guard { return newGuard(luascript.Each(src)) }

// NewBatchGuard compiles body into a guard that serves many obtains at
// once: body is Lua run as a function of calls (as luascript.NewMerged's
// bodies are, each call with only the guard's own keys and arguments),
// returning per call nil or false to let that obtain go on, or its
// refusal. The calls of one run may have different keys: body must serve
// any mix.
func NewBatchGuard(body string) *Guard { return newGuard(body) }

func newGuard(body string) *Guard {
	return &Guard{
		body:       body,
		alone:      luascript.NewMerged(body),
		fused:      luascript.NewMerged(batchFunction("guard", body) + mustSource("guarded_obtain")),
		tableFused: luascript.NewMerged(batchFunction("guard", body) + mustSource("table_obtain")),
	}
}

// NewFinish compiles src (a whole script for one call, reading KEYS and
// ARGV: libraries included) into a finish.
func NewFinish(src string) *Finish { return NewBatchFinish(luascript.Each(src)) }

// NewBatchFinish compiles body into a finish that serves many holders at
// once: body is Lua run as a function of calls (as luascript.NewMerged's
// bodies are: the concurrent ReleaseWith calls whose lock is still held,
// in the order they were made, each with only the finish's own keys and
// arguments), returning one reply per call. The calls of one run may have
// different keys (every ReleaseWith of f in one pipeline is merged): body
// must serve any mix. It runs atomically with the owner checks and the
// releases (scripts/release_with.lua).
func NewBatchFinish(body string) *Finish {
	return &Finish{
		body:       body,
		alone:      luascript.NewMerged(body),
		fused:      luascript.NewMerged(batchFunction("finish", body) + mustSource("release_with")),
		tableFused: luascript.NewMerged(batchFunction("finish", body) + mustSource("table_release_with")),
	}
}

// batchFunction wraps a merged script's body as a local function of calls.
func batchFunction(name, body string) string {
	return "local function " + name + "(calls)\n" + strings.TrimRight(body, "\n") + "\nend\n"
}

// mustSource is a script's text with its libraries; a missing one is a
// build mistake, caught by every test.
func mustSource(name string) string {
	src, err := lua.Source(name)
	if err != nil {
		panic(err)
	}
	return src
}

// Refused is ObtainGuarded's error when the guard refused.
type Refused struct {
	Reply any // what the guard returned
}

func (r *Refused) Error() string { return fmt.Sprintf("lock: refused by its guard: %v", r.Reply) }

// guardCall is a Guard with its keys and arguments, until it has run.
type guardCall struct {
	g    *Guard
	keys []string
	args []any
}

// ObtainGuarded is Obtain with g run, with keys and args, once and
// atomically with the first attempt to take the mutex: if g refuses, the
// lock is not taken and the error is a *Refused. A wait for the lock that
// follows does not run g again. When the lock is handed over inside this
// process (see Obtain) or the client is a Redis Cluster client, g runs by
// itself just before.
func (c *Client) ObtainGuarded(ctx context.Context, key string, ttl time.Duration, g *Guard, keys []string, args []any, opts ...Option) (*Lock, error) {
	if g == nil {
		return nil, invalidf("nil guard")
	}
	return c.obtain(ctx, key, ttl, &guardCall{g: g, keys: keys, args: args}, opts)
}

// runAlone runs the guard by itself: a *Refused, or nil to go on.
func (gc *guardCall) runAlone(ctx context.Context, c *Client) error {
	reply, err := c.runMerged(ctx, gc.g.alone, gc.keys, gc.args...).Result()
	switch {
	case err == redis.Nil:
		return nil
	case err != nil:
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return unavailable("guard", err)
	}
	return &Refused{Reply: reply}
}

// cluster reports whether c's steps must run by themselves.
func (c *Client) cluster() bool {
	_, ok := c.rdb.(*redis.ClusterClient)
	return ok
}

// Runner runs a merged script's call: a redispipe.Pipe (pipelined and
// merged with concurrent calls, acknowledged by replicas if so configured),
// or Direct.
type Runner interface {
	RunMerged(ctx context.Context, m *luascript.Merged, group string, keys []string, args ...any) *redis.Cmd
}

// Direct is a Runner sending each call on its own.
func Direct(rdb redis.Scripter) Runner { return direct{rdb} }

type direct struct{ rdb redis.Scripter }

func (d direct) RunMerged(ctx context.Context, m *luascript.Merged, _ string, keys []string, args ...any) *redis.Cmd {
	return m.Run(ctx, d.rdb, keys, args...)
}

// ReleaseWith runs f, with keys and args, and releases the lock, in one
// script sent through run — only if the lock is still held. It returns f's
// reply (nil for a nil reply).
//
// When the lock is no longer held, or was known lost, f does not run and
// the error is ErrNotHeld. When f returns an error reply
// (redis.error_reply), that is the error, and the lock is released. When
// the script fails (f raised an error, Redis could not be reached, run
// reported it unacknowledged), that error is returned: f may have run, or
// not; the lock is then released by itself. When f ran in a script of its
// own (a local handoff, Redis Cluster) and releasing the lock afterwards
// fails, f's reply still stands: the lock expires by itself.
// Like Release, call it once, instead of Release. Only a mutex can (other
// kinds: an error wrapping ErrInvalid, and the lock is released). Under
// Redis Cluster f runs by itself, then the lock is released.
func (l *Lock) ReleaseWith(ctx context.Context, run Runner, f *Finish, keys []string, args ...any) (any, error) {
	if l == nil {
		return nil, invalidf("release of a nil lock")
	}
	if f == nil || run == nil {
		_ = l.Release(ctx)
		return nil, invalidf("nil finish or runner")
	}
	if !l.released.CompareAndSwap(false, true) {
		return nil, ErrNotHeld
	}
	defer l.lease.obs.held(l.since)
	co, ok := l.hold.(*cohort)
	if !ok {
		_ = l.hold.release(ctx, l)
		return nil, invalidf("ReleaseWith: only a mutex runs a finish with its release")
	}
	return co.releaseWith(ctx, l, finishCall{f: f, run: run, keys: keys, args: args})
}

// finishCall is a Finish with what it runs with.
type finishCall struct {
	f    *Finish
	run  Runner
	keys []string
	args []any
}

// releaseWith is ReleaseWith for a mutex holder.
func (co *cohort) releaseWith(ctx context.Context, h *Lock, fc finishCall) (any, error) {
	if h.isLost() {
		_ = co.release(ctx, h)
		return nil, ErrNotHeld
	}
	if co.client.cluster() {
		reply, err := fc.run.RunMerged(ctx, fc.f.alone, "", fc.keys, fc.args...).Result()
		if err == redis.Nil {
			err = nil
		}
		if err == nil {
			reply, err = finishReply(reply)
		}
		// The finish ran (or failed) whatever the release says: its answer
		// is the caller's (an accepted order must not be reported failed);
		// a lock not released expires by itself.
		_ = co.release(ctx, h)
		return reply, err
	}
	// A waiter of this process is next: run the finish keeping the lock,
	// then hand it over (the waiter must not start before the finish ran).
	if co.mayHandOff() {
		code, reply, err := co.runFinish(ctx, fc, true)
		switch {
		case err != nil:
			_ = co.release(ctx, h)
			return nil, err
		case code == 0:
			co.lease.markLost()
			_ = co.release(ctx, h)
			return nil, ErrNotHeld
		}
		// The finish ran: its answer is the caller's whatever the handoff
		// or release says (a lock not released expires by itself).
		_ = co.release(ctx, h)
		return finishReply(reply)
	}
	yield := false
	defer func() { co.leaveGate(grant{yield: yield}) }()
	if err := co.lease.stop(ctx); err != nil {
		return nil, err
	}
	code, reply, err := co.runFinish(ctx, fc, false)
	if err != nil {
		go co.client.releaseValue(co.ops.keys, co.ops.value)
		return nil, err
	}
	if code == 0 {
		co.lease.markLost()
		return nil, ErrNotHeld
	}
	yield = code == 2
	return finishReply(reply)
}

// finishReply turns a finish's error reply (redis.error_reply) into the
// error: the finish ran and the lock was released.
func finishReply(reply any) (any, error) {
	if err, ok := reply.(error); ok {
		return nil, err
	}
	return reply, nil
}

// runFinish runs the fused finish: its code (0 not held, 1-2 released, 3
// kept) and the finish's reply.
func (co *cohort) runFinish(ctx context.Context, fc finishCall, keep bool) (int64, any, error) {
	k := co.ops.keys
	keepArg := "0"
	if keep {
		keepArg = "1"
	}
	// The finish's keys and arguments first, the lock's after (copies: the
	// caller's slices are not appended to).
	fkeys, fargs := fc.keys[:len(fc.keys):len(fc.keys)], fc.args[:len(fc.args):len(fc.args)]
	var script *luascript.Merged
	var keys []string
	var args []any
	if k.inTable() {
		script = fc.f.tableFused
		keys = append(fkeys, k.lock)
		args = append(fargs, k.field, co.ops.value, k.channel, keepArg)
	} else {
		script = fc.f.fused
		keys = append(fkeys, k.lock, k.waiting)
		args = append(fargs, co.ops.value, k.channel, keepArg)
	}
	res, err := fc.run.RunMerged(ctx, script, "", keys, args...).Slice()
	if err != nil {
		if ended(ctx) {
			return 0, nil, canceled(ctxErr(ctx))
		}
		return 0, nil, fmt.Errorf("lock: release with finish: %w", err)
	}
	if len(res) == 0 || len(res) > 2 {
		return 0, nil, fmt.Errorf("lock: release with finish returned %v", res)
	}
	code, ok := res[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("lock: release with finish returned %v", res)
	}
	var reply any
	if len(res) == 2 {
		reply = res[1]
	}
	return code, reply, nil
}

// mayHandOff reports whether a release now would likely hand the lock to a
// waiter of this process (release decides; a miss only costs a round trip).
func (co *cohort) mayHandOff() bool {
	g := co.gate
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return co.next <= co.last && time.Since(co.started) <= co.client.cfg.HandoffWindow &&
		len(g.queue) > 0 && g.queue[0].spec == co.spec
}
