package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
)

// Locks is order.Locker over a lock of internal/lock (the Redis mutex in
// the api and the worker).
type Locks struct {
	lock.Locker
	// RateShards is the rate limits' RateShards of the Redis the locks
	// are on; 0 is 1.
	RateShards int
}

var _ order.Locker = Locks{}

// guardedLocker is a lock that runs a guard with its obtain (lock.Client).
type guardedLocker interface {
	ObtainGuarded(ctx context.Context, key string, ttl time.Duration, g *lock.Guard, keys []string, args []any, opts ...lock.Option) (*lock.Lock, error)
}

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
		keys, args := rateLimitCall(r.Scope, r.Who, l.RateShards, r.PerSecond)
		held, err = gl.ObtainGuarded(ctx, key, ttl, rateLimitGuard, keys, args, opts...)
		var refused *lock.Refused
		if errors.As(err, &refused) {
			return nil, &order.RateLimited{PerSecond: r.PerSecond, RetryAfter: retryAfterOf(refused.Reply)}
		}
	}
	if err != nil {
		return nil, err
	}
	return held, nil
}
