package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/memo"
	"github.com/flashsale/flashsale/internal/order"
)

// Locks is order.Locker over a lock of internal/lock (the Redis mutex in
// the api and the worker).
type Locks struct{ lock.Locker }

var _ order.Locker = Locks{}

// Obtain takes key as the order domain asks. lock's errors when the wait
// ends (lock.ErrCanceled) match the context's error, as order.Locker wants,
// and Redis not answering is order.ErrUnavailable (lockWaitError).
func (l Locks) Obtain(ctx context.Context, key string, ttl time.Duration, o order.LockOptions) (order.Lock, error) {
	held, err := l.Locker.Obtain(ctx, key, ttl, lockOptions(o)...)
	if err != nil {
		return nil, lockWaitError(err)
	}
	return held, nil
}

// lockWaitError is the error of a wait for a lock that failed (err), as
// order.Locker says: an order.ErrUnavailable too when Redis had not
// answered it (lock.ErrUnavailable, with the context's error as well when
// the wait ended meanwhile), so the order service tells Redis from a
// holder that kept the lock.
func lockWaitError(err error) error {
	if errors.Is(err, lock.ErrUnavailable) {
		return fmt.Errorf("%w: %w", order.ErrUnavailable, err)
	}
	return err
}

// lockOptions are internal/lock's options for o: remembered (lockOpts),
// shared by every caller, so capped at their length (an append copies).
func lockOptions(o order.LockOptions) []lock.Option { return lockOpts.Get(o) }

// lockOpts remembers lockOptions' options: built for each order before,
// a slice and a closure an option (issue 43: a fresh shopper's order in
// the api's profile).
var lockOpts = memo.New(1024, func(o order.LockOptions) []lock.Option {
	opts := []lock.Option{lock.WithFamily(o.Family)}
	if o.NoFence {
		opts = append(opts, lock.WithoutFence())
	}
	if o.Set != "" {
		opts = append(opts, lock.InTable(o.Set))
	}
	return opts[:len(opts):len(opts)]
})
