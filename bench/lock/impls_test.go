package lock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
)

var procs = runtime.GOMAXPROCS(0)

// impls are the rows of every benchmark table, in order.
var impls = []impl{
	{name: "flashsale-mutex", clients: 1, build: buildOurs(lock.Config{}, mutexKind)},
	{name: "flashsale-mutex-4clients", clients: 4, build: buildOurs(lock.Config{}, mutexKind)},
	{name: "flashsale-mutex-nohandoff", clients: 1, build: buildOurs(lock.Config{MaxHandoffs: -1}, mutexKind)},
	{name: "flashsale-fair", clients: 1, build: buildOurs(lock.Config{}, fairKind)},
	{name: "flashsale-fair-4clients", clients: 4, build: buildOurs(lock.Config{}, fairKind)},
	{name: "flashsale-reentrant", clients: 1, build: buildOurs(lock.Config{}, reentrantKind)},
	{name: "seed-setnx-sleep10ms", clients: 1, build: newSeedSetNX(10 * time.Millisecond)},
	{name: "seed-setnx-sleep1ms", clients: 1, build: newSeedSetNX(time.Millisecond)},
	{name: "seed-brpop-queue", clients: 1, build: newSeedBRPOP},
}

const (
	mutexKind = iota
	fairKind
	reentrantKind
)

// ours is one of flashsale's lock kinds with its defaults (watchdog on).
type ours struct{ l lock.Locker }

func buildOurs(cfg lock.Config, kind int) func(testing.TB, *redis.Client) locker {
	return func(tb testing.TB, rdb *redis.Client) locker {
		c := lock.NewClient(rdb, cfg)
		tb.Cleanup(func() { c.Close() })
		switch kind {
		case fairKind:
			return ours{c.Fair()}
		case reentrantKind:
			return ours{c.Reentrant()}
		}
		return ours{c}
	}
}

func (o ours) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := o.l.Obtain(ctx, key, lockTTL)
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

// seedBRPOP is the seed articles' "non-competing blocking lock": one token
// in a list per key; obtain = BRPOP (Redis serves blocked clients in
// order), release = LPUSH it back. Its flaw is not speed: a holder that dies
// never pushes the token back and every waiter blocks forever.
type seedBRPOP struct {
	rdb  *redis.Client
	mu   sync.Mutex
	init map[string]bool
}

func newSeedBRPOP(_ testing.TB, rdb *redis.Client) locker {
	return &seedBRPOP{rdb: rdb, init: map[string]bool{}}
}

func (s *seedBRPOP) obtain(ctx context.Context, key string) (func(context.Context) error, error) {
	list := "seedq:" + key
	s.mu.Lock()
	if !s.init[key] {
		// The recipe's set-up: put the one token in, once.
		if err := s.rdb.Eval(ctx, `if redis.call('SETNX', KEYS[1]..':init', 1) == 1 then redis.call('LPUSH', KEYS[1], 't') end return 1`, []string{list}).Err(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.init[key] = true
	}
	s.mu.Unlock()
	if err := s.rdb.BRPop(ctx, 0, list).Err(); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.rdb.LPush(ctx, list, "t").Err() }, nil
}
