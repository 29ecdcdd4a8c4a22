package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// TryObtain makes one attempt to take the mutex key for ttl. It returns an
// error wrapping ErrNotObtained when someone else holds it.
func (c *Client) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer c.config().timeObtain("mutex", opts, time.Now(), &l, &err)
	o, err := c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, pttl, err := c.attempt(ctx, key, holdSpec{ttl: ttl.Milliseconds(), opts: o}, nil, false)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, notObtained(key, pttl)
	}
	return l, nil
}

// notObtained explains a failed attempt; pttl 0 means the answer came too late.
func notObtained(key string, pttl int64) error {
	if pttl == 0 {
		return fmt.Errorf("%w: %q: the answer came after the lock's validity", ErrNotObtained, key)
	}
	return fmt.Errorf("%w: %q is held (expires in %v)", ErrNotObtained, key, time.Duration(pttl)*time.Millisecond)
}

// late reports whether an obtain sent at sent for ttl milliseconds was
// answered after the holder could trust it: the key may already have
// expired and been taken by someone else.
func late(sent time.Time, ttlMillis int64) bool {
	ttl := time.Duration(ttlMillis) * time.Millisecond
	return !time.Now().Before(sent.Add(ttl - drift(ttl)))
}

// Obtain takes the mutex key for ttl, waiting as long as ctx allows. When ctx
// ends first it returns an error wrapping ErrCanceled and ctx.Err().
//
// Waiting costs Redis almost nothing: in each process only the first waiter
// of a key talks to Redis (the rest queue locally, in arrival order), and it
// sleeps until a release is published, the holder's ttl runs out, or
// Config.RecheckInterval passes, whichever is first. A holder hands the lock
// straight to the next local waiter when it can (see cohort).
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer c.config().timeObtain("mutex", opts, time.Now(), &l, &err)
	o, err := c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	if o.maxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.maxWait)
		defer cancel()
		o.maxWait = 0 // how long one waited is not part of what one holds
	}
	spec := holdSpec{ttl: ttl.Milliseconds(), opts: o}
	g, gr, err := c.gates.enter(ctx, gateKeyOf(key, o), spec)
	if err != nil {
		return nil, canceled(err)
	}
	if gr.lock != nil {
		return gr.lock, nil // handed over inside this process
	}
	l, err = c.obtainAsHead(ctx, key, spec, g, gr.yield)
	if err != nil {
		g.leave(grant{})
		return nil, err
	}
	return l, nil
}

// obtainAsHead runs the Redis side of Obtain for the first local waiter. On
// success the returned lock's cohort owns the gate.
func (c *Client) obtainAsHead(ctx context.Context, key string, spec holdSpec, g *gate, yield bool) (*Lock, error) {
	if yield {
		// The last holder here kept the lock for a while and other clients
		// were waiting: they have just been notified, let them have a go.
		t := time.NewTimer(c.cfg.YieldDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, canceled(ctx.Err())
		}
	}
	return c.waitFor(ctx, keysFor(c.cfg.Prefix, key, spec.opts).channel, func() (*Lock, int64, error) {
		return c.attempt(ctx, key, spec, g, true)
	})
}

// waitFor calls attempt until it obtains the lock, fails, or ctx ends. After
// a failed first attempt it subscribes to the key's release channel, and
// between attempts it sleeps until a release notice, the holder's remaining
// ttl (attempt's pttl), or the recheck interval. Subscribing before the next
// attempt closes the race where a release lands between a failed attempt and
// the wait.
func (c *Client) waitFor(ctx context.Context, channel string, attempt func() (*Lock, int64, error)) (*Lock, error) {
	l, _, err := attempt()
	if l != nil || err != nil {
		return l, err
	}
	sub, err := c.notify.subscribe(ctx, channel, c.cfg.RecheckInterval)
	if err != nil {
		if ended(ctx) {
			return nil, cutOff(ctx, "subscribe", err)
		}
		return nil, unavailable("subscribe", err)
	}
	defer c.notify.unsubscribe(sub)

	// Waiters in this process share the subscription's wake: a notice wakes
	// one of them, not a herd; the one that gets the lock passes the wake on.
	// (A mutex has one waiter per key here anyway: the head of its gate.)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l, pttl, err := attempt()
		if l != nil {
			c.notify.passOn(sub)
		}
		if l != nil || err != nil {
			return l, err
		}
		timer.Reset(c.recheckAfter(pttl))
		select {
		case <-sub.wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, canceled(ctx.Err())
		}
	}
}

// recheckAfter is how long a waiter sleeps when the holder's lock has pttl
// milliseconds left: just past its expiry (a crashed holder costs no more than
// its ttl), but never longer than RecheckInterval, with jitter so waiters in
// many processes do not retry in lockstep.
func (c *Client) recheckAfter(pttl int64) time.Duration {
	d := c.cfg.RecheckInterval
	if pttl >= 0 {
		d = min(d, time.Duration(pttl+1)*time.Millisecond)
	}
	return d + mrand.N(d/10+time.Millisecond)
}

func (c *Client) check(key string, ttl time.Duration, opts []Option) (options, error) {
	if c == nil || c.rdb == nil {
		return options{}, invalidf("nil redis client")
	}
	if err := validateKey(key); err != nil {
		return options{}, err
	}
	if err := validateTTL(ttl); err != nil {
		return options{}, err
	}
	o, err := buildOptions(opts)
	if err == nil && o.table != "" {
		err = validateTableKey(key)
	}
	return o, err
}

// attempt runs the obtain script once. It returns the held lock, or nil and
// the holder's remaining ttl in milliseconds. With a gate (Obtain), the lock
// is a cohort that can hand over to the gate's waiters, and a failed attempt
// marks the key as waited for.
func (c *Client) attempt(ctx context.Context, key string, spec holdSpec, g *gate, waiting bool) (*Lock, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	keys := keysFor(c.cfg.Prefix, key, spec.opts)
	block := int64(1)
	if g != nil && c.cfg.MaxHandoffs > 0 && g.hasWaiters() {
		block = int64(c.cfg.MaxHandoffs) + 1
	}
	marker := int64(0)
	if waiting {
		marker = (2 * c.cfg.RecheckInterval).Milliseconds()
	}
	sent := time.Now()
	value := newToken() + metaSep + c.pid + metaSep + strconv.FormatInt(sent.UnixMilli(), 10) +
		metaSep + c.cfg.Host + metaSep + spec.opts.label
	reserve := block
	if spec.opts.noFence {
		reserve = 0
	}
	var cmd *redis.Cmd
	if keys.inTable() {
		cmd = c.runMerged(ctx, tableObtainMerged, []string{keys.lock, keys.fence}, keys.field, value, spec.ttl,
			c.cfg.FenceRetention.Milliseconds(), reserve, marker, tableLife(time.Duration(spec.ttl)*time.Millisecond).Milliseconds())
	} else {
		cmd = c.runScript(ctx, obtainScript, []string{keys.lock, keys.fence, keys.waiting}, value, spec.ttl,
			c.cfg.FenceRetention.Milliseconds(), reserve, marker)
	}
	code, n, err := obtainReply(cmd)
	if err != nil {
		// The script may have run, in part (Lua does not roll back), although
		// its answer was lost or is an error: undo it in the background,
		// owner-checked. Should the undo overtake the lost obtain on another
		// connection, the key lingers until its ttl.
		go c.releaseValue(keys, value)
		if ended(ctx) {
			return nil, 0, cutOff(ctx, "obtain", err)
		}
		return nil, 0, unavailable("obtain", err)
	}
	if code == 0 {
		c.cfg.observer("mutex", spec.opts).contended()
		return nil, n, nil
	}
	if late(sent, spec.ttl) {
		go c.releaseValue(keys, value)
		return nil, 0, nil
	}
	first, last := n-block+1, n
	if spec.opts.noFence {
		first, last = 1, block // counts the handoffs; every holder's fence is 0
	}
	co := &cohort{
		client: c, key: key, gate: g, spec: spec,
		ops:     &mutexOps{c: c, keys: keys, value: value},
		next:    first + 1,
		last:    last,
		started: sent,
	}
	co.lease = startLease(co.ops, c.cfg.observer("mutex", spec.opts), time.Duration(spec.ttl)*time.Millisecond, spec.opts, sent, co.onLost)
	return &Lock{since: time.Now(), key: key, fence: co.fence(first), lost: co.lease.lost, lease: co.lease,
		hold: co}, 0, nil
}

// obtainReply reads obtain.lua's (or table_obtain.lua's) answer: code 1
// and the last fence reserved, or code 0 and the holder's pttl.
func obtainReply(cmd *redis.Cmd) (code, n int64, err error) {
	res, err := cmd.Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(res) == 2 {
		code, _ = res[0].(int64)
		var ok bool
		if n, ok = res[1].(int64); ok && (code == 0 || code == 1) {
			return code, n, nil
		}
	}
	return 0, 0, fmt.Errorf("lock: obtain script returned %v", res)
}

func (c *Client) releaseValue(keys mutexKeys, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = (&mutexOps{c: c, keys: keys, value: value}).release(ctx)
}

// A cohort is one hold of the mutex in Redis by this process, serving one or
// more local holders in turn (lock cohorting, after Dice, Marathe and Shavit).
// When a holder releases and the next local waiter asks for the same ttl and
// options, the lock is handed over without a Redis round trip: the next
// holder takes the next fence of the block the obtain script reserved, and
// the watchdog carries on. A cohort hands over at most MaxHandoffs times and
// for at most HandoffWindow, then releases in Redis; if other clients marked
// themselves waiting meanwhile, the next local waiter yields to them briefly.
type cohort struct {
	client  *Client
	key     string // the lock's name, as its holders asked for it
	gate    *gate  // nil for TryObtain: no local handoff
	spec    holdSpec
	ops     *mutexOps
	lease   *lease
	started time.Time
	next    int64 // next fence to hand out; guarded by gate.mu
	last    int64 // last fence of the block

	leaveOnce sync.Once
}

// fence is the fence of the holder numbered n in the block: n, or 0 without
// fencing.
func (co *cohort) fence(n int64) int64 {
	if co.spec.opts.noFence {
		return 0
	}
	return n
}

// onLost lets local waiters in and deletes the key if it is somehow still
// ours (a renewal that landed after its answer came too late).
func (co *cohort) onLost() {
	co.leaveGate(grant{})
	go co.client.releaseValue(co.ops.keys, co.ops.value)
}

// leaveGate lets the gate's next waiter in, once per cohort.
func (co *cohort) leaveGate(gr grant) {
	if co.gate != nil {
		co.leaveOnce.Do(func() { co.gate.leave(gr) })
	}
}

// handOff gives the lock to the next local waiter if the cohort's budget and
// the waiter's spec allow.
func (co *cohort) handOff() bool {
	g := co.gate
	if g == nil {
		return false
	}
	g.mu.Lock()
	if co.next > co.last || time.Since(co.started) > co.client.cfg.HandoffWindow {
		g.mu.Unlock()
		return false
	}
	w := g.popCompatible(co.spec)
	if w == nil {
		g.mu.Unlock()
		return false
	}
	lost, ok := co.lease.nextHolding()
	if !ok {
		g.queue = append([]*waiter{w}, g.queue...)
		g.mu.Unlock()
		return false
	}
	next := &Lock{since: time.Now(), key: co.key, fence: co.fence(co.next), lost: lost, lease: co.lease,
		hold: co}
	co.next++
	g.mu.Unlock()
	g.handTo(w, next)
	co.lease.obs.handedOff()
	return true
}

// release is Lock.Release for a mutex holder.
func (co *cohort) release(ctx context.Context, h *Lock) error {
	if !h.isLost() && co.handOff() {
		return nil
	}
	yield := false
	defer func() { co.leaveGate(grant{yield: yield}) }()
	if err := co.lease.stop(ctx); err != nil {
		return err
	}
	res, err := co.ops.release(ctx)
	if err != nil {
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return unavailable("release", err)
	}
	if res == 0 {
		co.lease.markLost()
		return ErrNotHeld
	}
	yield = res == 2
	if h.isLost() {
		// The key was still ours and is now deleted, but exclusivity was not
		// guaranteed for the whole hold: report it.
		return ErrNotHeld
	}
	return nil
}

// mutexOps are the owner-checked operations on one held mutex. value is what
// obtain stored: the token and the holder metadata.
type mutexOps struct {
	c     *Client
	keys  mutexKeys
	value string
}

func (m *mutexOps) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	var n int64
	var err error
	if m.keys.inTable() {
		n, err = tableRefreshScript.Run(ctx, m.c.rdb, []string{m.keys.lock}, m.keys.field, m.value, ttl.Milliseconds(),
			tableLife(ttl).Milliseconds()).Int64()
	} else {
		n, err = refreshScript.Run(ctx, m.c.rdb, []string{m.keys.lock}, m.value, ttl.Milliseconds()).Int64()
	}
	return n == 1, err
}

// tableLife is how long a table is kept at least, from an obtain or renewal
// of one of its locks held for ttl: well past the lock's expiry, so that a
// holder that died unreleased leaves its field for no longer than this.
func tableLife(ttl time.Duration) time.Duration { return max(2*ttl, time.Minute) }

// release returns 0 (not held), 1 (released) or 2 (released; others waited).
func (m *mutexOps) release(ctx context.Context) (int64, error) {
	if !m.keys.inTable() {
		return m.c.runScript(ctx, releaseScript, []string{m.keys.lock, m.keys.waiting}, m.value, m.keys.channel).Int64()
	}
	return m.c.runMerged(ctx, tableReleaseMerged, []string{m.keys.lock}, m.keys.field, m.value, m.keys.channel).Int64()
}

// newToken returns 128 random bits as 32 hex characters.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go ≥ 1.24 it panics instead)
	return hex.EncodeToString(b[:])
}
