package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// LockedReserver is the seed articles' recipe, kept for the strategy
// benchmark: take a global per-activity lock, read the stock and the user's
// count, check, write, release. It is correct (the lock serialises every
// buyer of the activity) but every purchase waits for every other. With the
// seed's SETNX-and-sleep lock it is that recipe's row, with our fair lock the
// "FIFO" row.
type LockedReserver struct {
	store *Store
	lock  GlobalLock
	ttl   time.Duration
}

// GlobalLock is what the recipe needs of a lock: wait for key, hold it,
// release it. lost, if not nil, is closed when the hold is known lost.
type GlobalLock interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (release func(), lost <-chan struct{}, err error)
}

// WithLocker is a GlobalLock on one of our locks.
func WithLocker(l lock.Locker) GlobalLock { return lockerLock{l} }

type lockerLock struct{ l lock.Locker }

func (ll lockerLock) Acquire(ctx context.Context, key string, ttl time.Duration) (func(), <-chan struct{}, error) {
	l, err := ll.l.Obtain(ctx, key, ttl, lock.WithFamily("activity-stock"))
	if err != nil {
		return nil, nil, err
	}
	return func() { _ = l.Release(context.WithoutCancel(ctx)) }, l.Lost(), nil // a failed release expires
}

// NewLockedReserver returns the recipe over store, locking with gl.
func NewLockedReserver(store *Store, gl GlobalLock) *LockedReserver {
	return &LockedReserver{store: store, lock: gl, ttl: 5 * time.Second}
}

// Reserve is Store.Reserve done as read-check-write under the activity's lock.
func (lr *LockedReserver) Reserve(ctx context.Context, r Request) (Reservation, error) {
	if err := r.validate(); err != nil {
		return Reservation{}, err
	}
	release, lost, err := lr.lock.Acquire(ctx, "act:"+strconv.FormatInt(r.ActivityID, 10), lr.ttl)
	if err != nil {
		return Reservation{}, fmt.Errorf("%w: lock: %w", ErrUnavailable, err)
	}
	defer release()

	rdb, k := lr.store.rdb, rediskeys.For(r.ActivityID)
	var meta *redis.SliceCmd
	var left, held *redis.StringCmd
	var seen *redis.BoolCmd
	var now *redis.TimeCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HMGet(ctx, k.Meta, "status", "starts_ms", "ends_ms", "limit")
		left = p.Get(ctx, k.Stock)
		held = p.HGet(ctx, k.Users, strconv.FormatInt(r.UserID, 10))
		seen = p.HExists(ctx, k.Reserved, r.OrderNo)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Reservation{}, fmt.Errorf("%w: read: %w", ErrUnavailable, err)
	}
	f := meta.Val()
	str := func(i int) string { s, _ := f[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	out := Reservation{}
	out.Remaining, _ = left.Int64()
	out.UserUnits, _ = held.Int64()
	nowMs := now.Val().UnixMilli()
	code := int64(0)
	switch {
	case str(0) == "":
		code = 1
	case seen.Val():
		code = 6
	case str(0) == "closed":
		code = 3
	case str(0) != "published":
		code = 1
	case nowMs < num(1):
		code = 2
	case nowMs >= num(2):
		code = 3
	case out.UserUnits+int64(r.Qty) > num(3):
		code = 4
	case out.Remaining < int64(r.Qty):
		code = 5
	}
	if code != 0 {
		return out, lr.store.outcome(r.ActivityID, code, out.Remaining)
	}
	select {
	case <-lost: // a nil channel never fires: that lock cannot tell
		return Reservation{}, fmt.Errorf("%w: the activity lock was lost before writing", ErrUnavailable)
	default:
	}
	var dec, inc *redis.IntCmd
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		dec = p.DecrBy(ctx, k.Stock, int64(r.Qty))
		inc = p.HIncrBy(ctx, k.Users, strconv.FormatInt(r.UserID, 10), int64(r.Qty))
		p.HSet(ctx, k.Reserved, r.OrderNo, strconv.FormatInt(r.UserID, 10)+"|"+strconv.Itoa(r.Qty)+"|r")
		p.HIncrBy(ctx, k.Meta, "accepted", 1)
		return nil
	})
	if err != nil {
		return Reservation{}, fmt.Errorf("%w: write: %w", ErrUnavailable, err)
	}
	out = Reservation{Remaining: dec.Val(), UserUnits: inc.Val()}
	return out, lr.store.outcome(r.ActivityID, 0, out.Remaining)
}
