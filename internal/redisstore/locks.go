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

// deferrer is a lock that can leave its obtain to the step run under it
// (lock.Client: lock elision).
type deferrer interface {
	Defer(key string, ttl time.Duration, opts ...lock.Option) (*lock.Deferred, error)
	DeferGuarded(key string, ttl time.Duration, g *lock.Guard, keys []string, args []any, opts ...lock.Option) (*lock.Deferred, error)
}

// deferredLock is Obtain's lock with order.LockOptions.Defer: not taken,
// until Store.Accept runs under it (lock.Deferred.RunWith).
type deferredLock struct {
	*lock.Deferred
	limit *order.RateLimit // charged as the lock's guard, or nil
}

// rateLimited is the order domain's refusal for the lock guard's.
func rateLimited(r *order.RateLimit, refused *lock.Refused) error {
	return &order.RateLimited{PerSecond: r.PerSecond, RetryAfter: retryAfterOf(refused.Reply)}
}

// Obtain takes key as the order domain asks. lock's errors when the wait
// ends (lock.ErrCanceled) match the context's error, as order.Locker wants.
// A rate limit is the lock's guard: over it, *order.RateLimited. With
// o.Defer and a lock.Client, nothing is taken yet: the lock is a
// lock.Deferred, which Store.Accept runs under.
func (l Locks) Obtain(ctx context.Context, key string, ttl time.Duration, o order.LockOptions) (order.Lock, error) {
	opts := []lock.Option{lock.WithFamily(o.Family)}
	if o.NoFence {
		opts = append(opts, lock.WithoutFence())
	}
	if o.Set != "" {
		opts = append(opts, lock.InTable(o.Set))
	}
	if d, ok := l.Locker.(deferrer); ok && o.Defer {
		var dl *lock.Deferred
		var err error
		if o.Wait > 0 {
			opts = append(opts, lock.WithMaxWait(o.Wait))
		}
		if o.Limit == nil {
			dl, err = d.Defer(key, ttl, opts...)
		} else {
			keys, args := rateLimitCall(o.Limit.Scope, o.Limit.Who, l.RateShards, o.Limit.PerSecond)
			dl, err = d.DeferGuarded(key, ttl, rateLimitGuard, keys, args, opts...)
		}
		if err != nil {
			return nil, err
		}
		return &deferredLock{Deferred: dl, limit: o.Limit}, nil
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
			return nil, rateLimited(r, refused)
		}
	}
	if err != nil {
		return nil, err
	}
	return held, nil
}
