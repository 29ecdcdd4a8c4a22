package redisstore

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
)

// Locks is order.Locker over a lock of internal/lock (the Redis mutex in
// the api and the worker).
type Locks struct{ lock.Locker }

var _ order.Locker = Locks{}

// Obtain takes key as the order domain asks. lock's errors when the wait
// ends (lock.ErrCanceled) match the context's error, as order.Locker wants.
func (l Locks) Obtain(ctx context.Context, key string, ttl time.Duration, o order.LockOptions) (order.Lock, error) {
	held, err := l.Locker.Obtain(ctx, key, ttl, lockOptions(o)...)
	if err != nil {
		return nil, err
	}
	return held, nil
}

// lockOptions are internal/lock's options for o.
func lockOptions(o order.LockOptions) []lock.Option {
	opts := []lock.Option{lock.WithFamily(o.Family)}
	if o.NoFence {
		opts = append(opts, lock.WithoutFence())
	}
	if o.Set != "" {
		opts = append(opts, lock.InTable(o.Set))
	}
	return opts
}
