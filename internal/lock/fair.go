package lock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fair is the fair lock: waiters get it in the order they arrived, across
// all processes, without polling.
//
// Every waiter has a place in a queue in Redis. A release grants the lock to
// the first waiter directly and publishes its token, so exactly that waiter
// wakes (no thundering herd); it confirms with one call that restarts the
// ttl. The usual BRPOP token queue hangs forever when a holder dies with the
// token; here the holder's lease expires like any lock's, and the waiters,
// who sleep no longer than the holder's remaining ttl, find the lock free
// and grant it to the first of them. A waiter renews its place every third
// of Config.FairWaiterLease; one that stops (it crashed) is skipped once its
// deadline, kept in Redis server time, has passed. A waiter that gives up
// leaves the queue at once, and passes the lock on if it was granted it
// meanwhile.
type Fair struct{ c *Client }

// Fair returns the client's fair lock. It shares the client's Redis
// connection, grant subscription and Config.
func (c *Client) Fair() *Fair {
	c.fairOnce.Do(func() { c.fair = &Fair{c: c} })
	return c.fair
}

// TryObtain takes key only if nobody holds it and nobody is queued for it; it
// returns an error wrapping ErrNotObtained otherwise.
func (f *Fair) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer f.c.cfg.timeObtain("fair", opts, time.Now(), &l, &err)
	o, err := f.c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	keys, token := newFairKeys(f.c.cfg.Prefix, key), newToken()
	l, res, err := f.attempt(ctx, keys, key, token, ttl, o, 0)
	if err != nil {
		f.leave(keys, token) // its answer lost, the script may have taken the lock
		return nil, err
	}
	if l == nil {
		return nil, notObtained(key, res)
	}
	return l, nil
}

// Obtain queues for key and waits for its turn as long as ctx allows. When
// ctx ends first it leaves the queue and returns an error wrapping
// ErrCanceled.
func (f *Fair) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer f.c.cfg.timeObtain("fair", opts, time.Now(), &l, &err)
	o, err := f.c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	keys := newFairKeys(f.c.cfg.Prefix, key)
	token := newToken()

	// Listen for our grant before queueing, so it cannot be missed.
	sub, err := f.c.notify.subscribe(ctx, keys.channel, f.c.cfg.RecheckInterval)
	if err != nil {
		if ended(ctx) {
			return nil, canceled(ctxErr(ctx))
		}
		return nil, unavailable("subscribe", err)
	}
	defer f.c.notify.unsubscribe(sub)
	granted := f.c.notify.watch(sub, token)
	defer f.c.notify.unwatch(sub, token)

	lease := f.c.cfg.FairWaiterLease
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l, pttl, err := f.attempt(ctx, keys, key, token, ttl, o, lease)
		if err != nil {
			f.leave(keys, token)
			return nil, err
		}
		if l != nil {
			return l, nil
		}
		// Sleep until our grant, the holder's ttl (if it died, someone must
		// grant the lock), or the time to renew our place.
		wait := lease / 3
		if pttl >= 0 {
			wait = min(wait, time.Duration(pttl+1)*time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-granted:
		case <-timer.C:
		case <-ctx.Done():
			f.leave(keys, token)
			return nil, canceled(ctx.Err())
		}
	}
}

// attempt runs fair_obtain once. lease 0 only tries. It returns the lock, or
// nil and the holder's remaining ttl (0 when an answer came too late).
func (f *Fair) attempt(ctx context.Context, keys fairKeys, key, token string, ttl time.Duration, o options, lease time.Duration) (*Lock, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	sent := time.Now()
	meta := f.c.pid + metaSep + strconv.FormatInt(sent.UnixMilli(), 10) + metaSep + f.c.cfg.Host + metaSep + o.label
	res, err := fairObtainScript.Run(ctx, f.c.rdb, keys.all(),
		token, ttl.Milliseconds(), f.c.cfg.FenceRetention.Milliseconds(), meta, lease.Milliseconds(), keys.channel,
	).Int64Slice()
	if err != nil {
		if ended(ctx) {
			return nil, 0, canceled(ctxErr(ctx))
		}
		return nil, 0, unavailable("obtain", err)
	}
	if len(res) < 2 {
		return nil, 0, fmt.Errorf("lock: fair obtain script returned %v", res)
	}
	if res[0] == 0 {
		f.c.cfg.observer("fair", o).contended()
		return nil, res[1], nil
	}
	if late(sent, ttl.Milliseconds()) {
		// Give it up before anything else uses this token: a leave still in
		// flight when Obtain retries with the same token would release the
		// lock that retry gets.
		f.leaveNow(keys, token)
		return nil, 0, nil
	}
	h := &fairHold{f: f, keys: keys, token: token}
	ls := startLease(h, f.c.cfg.observer("fair", o), ttl, o, sent, nil)
	return &Lock{since: time.Now(), key: key, fence: res[1], lost: ls.lost, lease: ls, hold: h}, 0, nil
}

// leave takes token out of the queue, passing the lock on if it was granted
// it; in the background, as the caller's context may be over. The token must
// not be used again.
func (f *Fair) leave(keys fairKeys, token string) { go f.leaveNow(keys, token) }

// leaveNow is leave, waited for.
func (f *Fair) leaveNow(keys fairKeys, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = fairLeaveScript.Run(ctx, f.c.rdb, keys.all(), token, keys.channel, f.c.cfg.FenceRetention.Milliseconds()).Err()
}

// fairHold is one hold of a fair lock.
type fairHold struct {
	f     *Fair
	keys  fairKeys
	token string
}

func (h *fairHold) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := fairRefreshScript.Run(ctx, h.f.c.rdb, []string{h.keys.lock}, h.token, ttl.Milliseconds()).Int64()
	return n == 1, err
}

func (h *fairHold) release(ctx context.Context, l *Lock) error {
	if err := l.lease.stop(ctx); err != nil {
		return err
	}
	n, err := fairReleaseScript.Run(ctx, h.f.c.rdb, h.keys.all(), h.token, h.keys.channel, h.f.c.cfg.FenceRetention.Milliseconds()).Int64()
	if err != nil {
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return unavailable("release", err)
	}
	if n == 0 {
		l.lease.markLost()
		return ErrNotHeld
	}
	if l.isLost() {
		return ErrNotHeld
	}
	return nil
}

// Holder reports who holds the fair lock key and how many wait for it, or
// ErrNotHeld when nobody holds it.
func (f *Fair) Holder(ctx context.Context, key string) (Holder, error) {
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	keys := newFairKeys(f.c.cfg.Prefix, key)
	var fields *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	var queued *redis.IntCmd
	_, err := f.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, keys.lock)
		pttl = p.PTTL(ctx, keys.lock)
		queued = p.ZCard(ctx, keys.queue)
		return nil
	})
	if err != nil {
		return Holder{}, unavailable("inspect", err)
	}
	m := fields.Val()
	if len(m) == 0 {
		return Holder{}, ErrNotHeld
	}
	h := Holder{TTL: pttl.Val(), Count: 1, Waiting: int(queued.Val())}
	h.Owner = m["token"][:min(8, len(m["token"]))]
	h.Fence, _ = strconv.ParseInt(m["fence"], 10, 64)
	h.setMeta(m["meta"])
	return h, nil
}
