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
	opts := []lock.Option{lock.WithFamily(o.Family)}
	if o.NoFence {
		opts = append(opts, lock.WithoutFence())
	}
	held, err := l.Locker.Obtain(ctx, key, ttl, opts...)
	if err != nil {
		return nil, err
	}
	return held, nil
}
