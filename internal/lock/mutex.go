package lock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/obtain.lua
	obtainLua    string
	obtainScript = redis.NewScript(obtainLua)

	//go:embed scripts/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed scripts/refresh.lua
	refreshLua    string
	refreshScript = redis.NewScript(refreshLua)
)

// TryObtain makes one attempt to take the mutex key for ttl. It returns an
// error wrapping ErrNotObtained when someone else holds it.
func (c *Client) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	o, err := c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, pttl, err := c.attempt(ctx, newMutexKeys(c.cfg.Prefix, key), key, ttl, o, nil)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, fmt.Errorf("%w: %q is held (expires in %v)", ErrNotObtained, key, time.Duration(pttl)*time.Millisecond)
	}
	return l, nil
}

// Obtain takes the mutex key for ttl, waiting as long as ctx allows. When ctx
// ends first it returns an error wrapping ErrCanceled and ctx.Err().
//
// Waiting costs Redis almost nothing: in each process only the first waiter
// of a key talks to Redis (the rest queue locally, in arrival order), and it
// sleeps until a release is published, the holder's ttl runs out, or
// Config.RecheckInterval passes, whichever is first.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error) {
	o, err := c.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	leave, err := c.gates.enter(ctx, key)
	if err != nil {
		return nil, canceled(err)
	}
	l, err := c.obtainAsHead(ctx, key, ttl, o, leave)
	if err != nil {
		leave()
		return nil, err
	}
	return l, nil
}

// obtainAsHead runs the Redis side of Obtain for the first local waiter. On
// success the lock owns leave and calls it when the hold ends.
func (c *Client) obtainAsHead(ctx context.Context, key string, ttl time.Duration, o options, leave func()) (*Lock, error) {
	keys := newMutexKeys(c.cfg.Prefix, key)
	l, _, err := c.attempt(ctx, keys, key, ttl, o, leave)
	if l != nil || err != nil {
		return l, err
	}

	// Held: listen for its release before trying again, so a release that
	// happens between our attempt and our wait cannot be missed.
	sub, err := c.notify.subscribe(ctx, keys.channel, c.cfg.RecheckInterval)
	if err != nil {
		if ctx.Err() != nil {
			return nil, canceled(ctx.Err())
		}
		return nil, unavailable("subscribe", err)
	}
	defer c.notify.unsubscribe(sub)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sub.drain()
		l, pttl, err := c.attempt(ctx, keys, key, ttl, o, leave)
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
	return buildOptions(opts)
}

// attempt runs the obtain script once. It returns the held lock, or nil and
// the holder's remaining ttl in milliseconds.
func (c *Client) attempt(ctx context.Context, keys mutexKeys, key string, ttl time.Duration, o options, leave func()) (*Lock, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	token := newToken()
	sent := time.Now()
	value := token + metaSep + c.pid + metaSep + strconv.FormatInt(sent.UnixMilli(), 10) +
		metaSep + c.cfg.Host + metaSep + o.label
	res, err := obtainScript.Run(ctx, c.rdb,
		[]string{keys.lock, keys.fence},
		value, ttl.Milliseconds(), c.cfg.FenceRetention.Milliseconds(),
	).Int64Slice()
	if err != nil {
		var serverErr redis.Error
		if !errors.As(err, &serverErr) {
			// The script may have run although its answer was lost: undo it
			// in the background, owner-checked, so it cannot linger for a ttl.
			go c.releaseValue(keys, value)
		}
		if ctx.Err() != nil {
			return nil, 0, canceled(ctx.Err())
		}
		return nil, 0, unavailable("obtain", err)
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("lock: obtain script returned %v", res)
	}
	if res[0] == 0 {
		return nil, res[1], nil
	}
	ops := &mutexOps{rdb: c.rdb, keys: keys, value: value}
	return newLease(key, res[1], ttl, sent, o, ops, leave), 0, nil
}

func (c *Client) releaseValue(keys mutexKeys, value string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = (&mutexOps{rdb: c.rdb, keys: keys, value: value}).release(ctx)
}

// mutexOps are the owner-checked operations on one held mutex. value is what
// obtain stored: the token and the holder metadata.
type mutexOps struct {
	rdb   redis.UniversalClient
	keys  mutexKeys
	value string
}

func (m *mutexOps) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := refreshScript.Run(ctx, m.rdb, []string{m.keys.lock}, m.value, ttl.Milliseconds()).Int64()
	return n == 1, err
}

func (m *mutexOps) release(ctx context.Context) (bool, error) {
	n, err := releaseScript.Run(ctx, m.rdb, []string{m.keys.lock}, m.value, m.keys.channel).Int64()
	return n == 1, err
}

// newToken returns 128 random bits as 32 hex characters.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux (Go ≥ 1.24 it panics instead)
	return hex.EncodeToString(b[:])
}
