package lock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
)

var procs = runtime.GOMAXPROCS(0)

// impls are the rows of every benchmark table, in order.
var impls = []impl{
	{name: "flashsale-mutex", clients: 1, build: buildOurs},
	{name: "flashsale-mutex-4clients", clients: 4, build: buildOurs},
	{name: "seed-setnx-sleep10ms", clients: 1, build: newSeedSetNX(10 * time.Millisecond)},
	{name: "seed-setnx-sleep1ms", clients: 1, build: newSeedSetNX(time.Millisecond)},
}

// ours is flashsale's mutex with its defaults (watchdog on).
type ours struct{ c *lock.Client }

func buildOurs(tb testing.TB, rdb *redis.Client) locker {
	c := lock.New(rdb)
	tb.Cleanup(func() { c.Close() })
	return ours{c}
}

func (o ours) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := o.c.Obtain(ctx, key, lockTTL)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// seedSetNX is the recipe of the seed articles: SET key token NX PX ttl,
// retried after a fixed sleep while it fails; released by a Lua
// compare-and-delete.
type seedSetNX struct {
	rdb   *redis.Client
	sleep time.Duration
}

var seedRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func newSeedSetNX(sleep time.Duration) func(testing.TB, *redis.Client) locker {
	return func(_ testing.TB, rdb *redis.Client) locker { return &seedSetNX{rdb: rdb, sleep: sleep} }
}

func (s *seedSetNX) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	for {
		ok, err := s.rdb.SetNX(ctx, "seed:"+key, token, lockTTL).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func(ctx context.Context) error {
				n, err := seedRelease.Run(ctx, s.rdb, []string{"seed:" + key}, token).Int()
				if err == nil && n == 0 {
					err = errors.New("seed lock: not held at release")
				}
				return err
			}, nil
		}
		select {
		case <-time.After(s.sleep):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
