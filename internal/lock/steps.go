package lock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
// A step is a script of its own, with its own KEYS and ARGV: the fused
// script calls it as a Lua function with just the caller's keys and
// arguments, so one source serves fused and alone. Steps' keys must hash to
// the lock's Redis Cluster slot to be fused; under Redis Cluster the steps
// simply run by themselves, one after the other (not atomically).

// Guard is Lua run just before a mutex's first obtain attempt, in the same
// script. It returns nil (or false) to let the obtain go on; anything else
// refuses: the lock is not taken and ObtainGuarded returns a *Refused
// carrying that reply.
type Guard struct {
	fused *redis.Script // the guard, then obtain.lua
	alone *redis.Script
}

// Finish is Lua run by ReleaseWith in the same script as the release, only
// while the lock is held. Its reply is ReleaseWith's.
type Finish struct {
	fused *redis.Script // owner check, the finish, release.lua's deletion
	alone *redis.Script
}

// The mutex scripts' own KEYS and ARGV come first in a fused script; the
// step's follow.
const (
	obtainKeys, obtainArgs   = 3, 5 // obtain.lua
	releaseKeys, releaseArgs = 2, 3 // release.lua's, plus "keep"
)

// NewGuard compiles src (a whole script: libraries included) into a guard.
func NewGuard(src string) *Guard {
	obtain, err := lua.Source("obtain")
	if err != nil {
		panic(err) // a build mistake, caught by every test
	}
	return &Guard{alone: redis.NewScript(src), fused: redis.NewScript(
		stepFunction("guard", src) + stepFunction("obtain", obtain) +
			stepArgs(obtainKeys, obtainArgs) + `
local refused = guard(step_keys, step_args)
if refused then
  return {2, refused}
end
return obtain(KEYS, ARGV)
`)}
}

// NewFinish compiles src (a whole script: libraries included) into a finish.
func NewFinish(src string) *Finish {
	return &Finish{alone: redis.NewScript(src), fused: redis.NewScript(
		stepFunction("finish", src) + stepArgs(releaseKeys, releaseArgs) + `
-- KEYS[1] lock, KEYS[2] waiting marker; ARGV[1] owner value, ARGV[2] release
-- channel, ARGV[3] '1' to keep the lock (it goes to a waiter of this process
-- next). Returns {0} when not held (the finish did not run), else {code,
-- reply}: 1 released, 2 released and waiters woken, 3 kept.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {0}
end
local reply = finish(step_keys, step_args)
if ARGV[3] == '1' then
  return {3, reply}
end
redis.call('DEL', KEYS[1])
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PUBLISH', ARGV[2], '1')
  return {2, reply}
end
return {1, reply}
`)}
}

// stepFunction wraps a script's source as a local function of (KEYS, ARGV):
// the parameters shadow the globals, so the script reads its own.
func stepFunction(name, src string) string {
	return "local function " + name + "(KEYS, ARGV)\n" + strings.TrimRight(src, "\n") + "\nend\n"
}

// stepArgs sets step_keys and step_args to what follows the lock's own n
// keys and m arguments.
func stepArgs(n, m int) string {
	return fmt.Sprintf(`local step_keys, step_args = {}, {}
for i = %d, #KEYS do step_keys[#step_keys + 1] = KEYS[i] end
for i = %d, #ARGV do step_args[#step_args + 1] = ARGV[i] end
`, n+1, m+1)
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
	reply, err := c.runScript(ctx, gc.g.alone, gc.keys, gc.args...).Result()
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

// Runner runs a script: a redisbatch.Batcher (pipelined, acknowledged by
// replicas if so configured), or Direct.
type Runner interface {
	Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd
}

// Direct is a Runner sending each script on its own.
func Direct(rdb redis.Scripter) Runner { return direct{rdb} }

type direct struct{ rdb redis.Scripter }

func (d direct) Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, d.rdb, keys, args...)
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
// not; the lock is then released by itself.
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
	if l.releaseWith == nil {
		_ = l.release(ctx, l)
		return nil, invalidf("ReleaseWith: only a mutex runs a finish with its release")
	}
	return l.releaseWith(ctx, l, finishCall{f: f, run: run, keys: keys, args: args})
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
		reply, err := fc.run.Run(ctx, fc.f.alone, fc.keys, fc.args...).Result()
		if err == redis.Nil {
			err = nil
		}
		if err == nil {
			reply, err = finishReply(reply)
		}
		if rerr := co.release(ctx, h); err == nil && rerr != nil {
			return reply, rerr
		}
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
		if err := co.release(ctx, h); err != nil {
			return nil, err
		}
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
	keys := append([]string{k.lock, k.waiting}, fc.keys...)
	args := append([]any{co.ops.value, k.channel, keepArg}, fc.args...)
	res, err := fc.run.Run(ctx, fc.f.fused, keys, args...).Slice()
	if err != nil {
		if ended(ctx) {
			return 0, nil, canceled(ctxErr(ctx))
		}
		return 0, nil, fmt.Errorf("lock: release with finish: %w", err)
	}
	code, ok := res[0].(int64)
	if !ok || len(res) > 2 {
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
