package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Locks is order.Locker over a lock of internal/lock (the Redis mutex in
// the api and the worker).
type Locks struct{ lock.Locker }

var _ order.Locker = Locks{}

// guardedLocker is a lock that runs a guard with its obtain (lock.Client).
type guardedLocker interface {
	ObtainGuarded(ctx context.Context, key string, ttl time.Duration, g *lock.Guard, keys []string, args []any, opts ...lock.Option) (*lock.Lock, error)
}

// rateLimitGuard is rate_limit.lua, run with the lock's obtain.
var rateLimitGuard = lock.NewBatchGuard(mustSource("rate_limit"))

// Obtain takes key as the order domain asks. lock's errors when the wait
// ends (lock.ErrCanceled) match the context's error, as order.Locker wants.
// A rate limit is the lock's guard: over it, *order.RateLimited.
func (l Locks) Obtain(ctx context.Context, key string, ttl time.Duration, o order.LockOptions) (order.Lock, error) {
	opts := []lock.Option{lock.WithFamily(o.Family)}
	if o.NoFence {
		opts = append(opts, lock.WithoutFence())
	}
	if o.Set != "" {
		opts = append(opts, lock.InTable(o.Set))
	}
	var held *lock.Lock
	var err error
	if o.Limit == nil {
		held, err = l.Locker.Obtain(ctx, key, ttl, opts...)
	} else {
		gl, ok := l.Locker.(guardedLocker)
		if !ok {
			return nil, fmt.Errorf("%w: a rate-limited lock needs a lock.Client, not %T", order.ErrUnavailable, l.Locker)
		}
		r := o.Limit
		// redis_rate.PerSecond(n): burst n, rate n per 1 s, cost 1.
		held, err = gl.ObtainGuarded(ctx, key, ttl, rateLimitGuard,
			[]string{rediskeys.RateLimitStored(r.Scope, r.Who)}, []any{r.PerSecond, r.PerSecond, 1, 1}, opts...)
		var refused *lock.Refused
		if errors.As(err, &refused) {
			return nil, rateLimited(r.PerSecond, refused.Reply)
		}
	}
	if err != nil {
		return nil, err
	}
	return held, nil
}

// rateLimited reads rate_limit.lua's refusal: {retry after, seconds}.
func rateLimited(rps int, reply any) error {
	e := &order.RateLimited{PerSecond: rps, RetryAfter: time.Second}
	if r, ok := reply.([]any); ok && len(r) == 1 {
		if s, ok := r[0].(string); ok {
			if secs, err := strconv.ParseFloat(s, 64); err == nil {
				e.RetryAfter = time.Duration(secs * float64(time.Second))
			}
		}
	}
	return e
}
