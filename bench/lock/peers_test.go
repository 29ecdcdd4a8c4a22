package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

func init() {
	impls = append(impls,
		impl{name: "bsm-redislock-linear1ms", clients: 1, build: buildRedislock},
		impl{name: "redsync-default", clients: 1, build: buildRedsync},
	)
}

// bsm/redislock with a 1ms linear retry, waiting as long as ctx allows.
type redislockPeer struct{ c *redislock.Client }

func buildRedislock(_ testing.TB, rdb *redis.Client) locker {
	return redislockPeer{redislock.New(rdb)}
}

func (p redislockPeer) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := p.c.Obtain(ctx, "rl:"+key, lockTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// go-redsync/redsync on one node, with its default retry (32 tries, 50-250ms
// random delay) raised so a waiter never gives up during the run.
type redsyncPeer struct{ rs *redsync.Redsync }

func buildRedsync(_ testing.TB, rdb *redis.Client) locker {
	return redsyncPeer{redsync.New(goredis.NewPool(rdb))}
}

func (p redsyncPeer) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	m := p.rs.NewMutex("rs:"+key, redsync.WithExpiry(lockTTL), redsync.WithTries(1<<30))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
}
