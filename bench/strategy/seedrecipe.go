package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
)

// lockedReserver is the seed articles' recipe, kept here only for the
// benchmark's rows (d) and (e) and never used by real orders (they go
// through internal/redisstore's place.lua): take a global per-activity
// lock, read the stock and the user's count, check, write, release. It is
// correct (the lock serialises every buyer of the activity) but every
// purchase waits for every other. With the seed's SETNX-and-sleep lock it
// is that recipe's row, with our fair lock the "FIFO" row. It keeps its
// books in the activity's own stock and users keys, so the benchmark's
// oversold check reads them as it reads ours.
type lockedReserver struct {
	rdb  redis.UniversalClient
	lock globalLock
	ttl  time.Duration
}

// globalLock is what the recipe needs of a lock: wait for key, hold it,
// release it. lost, if not nil, is closed when the hold is known lost.
type globalLock interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (release func(), lost <-chan struct{}, err error)
}

// withLocker is a globalLock on one of our locks.
func withLocker(l lock.Locker) globalLock { return lockerLock{l} }

type lockerLock struct{ l lock.Locker }

func (ll lockerLock) Acquire(ctx context.Context, key string, ttl time.Duration) (func(), <-chan struct{}, error) {
	l, err := ll.l.Obtain(ctx, key, ttl, lock.WithFamily("activity-stock"))
	if err != nil {
		return nil, nil, err
	}
	return func() { _ = l.Release(context.WithoutCancel(ctx)) }, l.Lost(), nil // a failed release expires
}

func newLockedReserver(rdb redis.UniversalClient, gl globalLock) *lockedReserver {
	return &lockedReserver{rdb: rdb, lock: gl, ttl: 5 * time.Second}
}

// reservedKey is the recipe's own record of the orders it took: order no
// -> "user|qty".
func reservedKey(activityID int64) string {
	return "bench:{act:" + strconv.FormatInt(activityID, 10) + "}:reserved"
}

// errDuplicate: the order was reserved before (a retry).
var errDuplicate = errors.New("seed recipe: order already reserved")

// Reserve takes qty units for the user's order as read-check-write under
// the activity's lock, with the sale's checks in the order lib_sale.lua
// makes them, and returns the units left.
func (lr *lockedReserver) Reserve(ctx context.Context, activityID, userID int64, qty int, orderNo string) (int64, error) {
	if qty <= 0 || userID <= 0 {
		return 0, fmt.Errorf("seed recipe: bad request: user %d, quantity %d", userID, qty)
	}
	release, lost, err := lr.lock.Acquire(ctx, "act:"+strconv.FormatInt(activityID, 10), lr.ttl)
	if err != nil {
		return 0, fmt.Errorf("%w: lock: %w", stock.ErrUnavailable, err)
	}
	defer release()

	k := rediskeys.For(activityID)
	user := strconv.FormatInt(userID, 10)
	var meta *redis.SliceCmd
	var left, held *redis.StringCmd
	var seen *redis.BoolCmd
	var now *redis.TimeCmd
	_, err = lr.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HMGet(ctx, k.Meta, "status", "starts_ms", "ends_ms", "limit")
		left = p.Get(ctx, k.Stock)
		held = p.HGet(ctx, k.Users, user)
		seen = p.HExists(ctx, reservedKey(activityID), orderNo)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: read: %w", stock.ErrUnavailable, err)
	}
	f := meta.Val()
	str := func(i int) string { s, _ := f[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	remaining, _ := left.Int64()
	units, _ := held.Int64()
	nowMs := now.Val().UnixMilli()
	code := int64(0)
	switch {
	case seen.Val():
		return remaining, errDuplicate
	case str(0) == "":
		code = 1
	case str(0) == "closed":
		code = 3
	case str(0) != "published":
		code = 1
	case nowMs < num(1):
		code = 2
	case nowMs >= num(2):
		code = 3
	case units+int64(qty) > num(3):
		code = 4
	case remaining < int64(qty):
		code = 5
	}
	if err, ok := redisstore.SaleRefusal(code); ok {
		return remaining, err
	}
	select {
	case <-lost: // a nil channel never fires: that lock cannot tell
		return 0, fmt.Errorf("%w: the activity lock was lost before writing", stock.ErrUnavailable)
	default:
	}
	var dec *redis.IntCmd
	_, err = lr.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		dec = p.DecrBy(ctx, k.Stock, int64(qty))
		p.HIncrBy(ctx, k.Users, user, int64(qty))
		p.HSet(ctx, reservedKey(activityID), orderNo, user+"|"+strconv.Itoa(qty))
		p.HIncrBy(ctx, k.Meta, "accepted", 1)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%w: write: %w", stock.ErrUnavailable, err)
	}
	return dec.Val(), nil
}
