// Package redisstore is everything Redis does for an order: the order
// domain's Redis adapter. It implements order.Store with one atomic Lua
// script per decision — an order's is place.lua: the per-user lock, the
// per-user rate limit and the accept in one — and keeps the sale's rules
// (lib_sale.lua) and every script's codes (codes.go, the one table). It
// also holds the worker's reads and marks on the orders and the outbox,
// the rate limiter of the other routes (Limiter, the same lib_rate.lua),
// and order.Locker over internal/lock (Locks). scripts/ has each script,
// headed by its KEYS, ARGV and returns; `go run ./cmd/api scripts` prints
// them whole, libraries included, as Redis runs them.
//
// Every key of an order or group shares its activity's hash tag (keys come
// from internal/rediskeys; order numbers and group ids embed the activity
// id), so each script touches one Redis Cluster slot.
package redisstore

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// Lua is this package's scripts; lock.Lua's lib_lock is linked for
// place.lua.
var Lua = luascript.New(scriptFiles, "scripts", lock.Lua)

var (
	openGroupScript  = Lua.Script("open_group")
	joinGroupScript  = Lua.Script("join_group")
	settleScript     = Lua.Script("settle_group")
	transitionScript = Lua.Script("transition")
	persistedScript  = Lua.Script("persisted")
	readOrderScript  = Lua.Script("read_order")
	readPayScript    = Lua.Script("read_payment")
	// place.lua and rate_limit.lua are written for a batch of concurrent
	// calls: one run of the script for a pipeline's (luascript.Merged).
	placeMerged     = luascript.NewMerged(mustSource("place"))
	rateLimitMerged = luascript.NewMerged(mustSource("rate_limit"))
)

// Scripts are the scripts the service loads, by name, as Redis runs them:
// libraries included, and a merged script in its frame (cmd/api scripts
// prints them).
func Scripts() map[string]string {
	return map[string]string{
		"place":        placeMerged.Source(),
		"rate_limit":   rateLimitMerged.Source(),
		"open_group":   mustSource("open_group"),
		"join_group":   mustSource("join_group"),
		"settle_group": mustSource("settle_group"),
		"transition":   mustSource("transition"),
		"persisted":    mustSource("persisted"),
		"save_payment": mustSource("save_payment"),
		"read_order":   mustSource("read_order"),
		"read_payment": mustSource("read_payment"),
	}
}

// mustSource is a script's source with its libraries; a missing one is a
// build mistake, caught by every test.
func mustSource(name string) string {
	src, err := Lua.Source(name)
	if err != nil {
		panic(err)
	}
	return src
}

// Config tunes an Orders. The zero value gives the defaults in the
// comments.
//
// How long records are kept is not the store's to say: every key of a sale
// — its orders, their Idempotency-Keys, its groups — expires with the
// sale's keys (load.lua: activity.LiveUntil, retention after the last
// moment an order can still change).
type Config struct {
	// Ack is how many replicas must confirm a change before it is reported
	// (REDIS_ACK_REPLICAS, REDIS_ACK_TIMEOUT); none by default.
	Ack redispipe.Ack
	// Locks takes the per-user lock of an order (order.UserTurn): when
	// nobody holds it, place.lua checks that instead (lock.Client.Elide).
	// Nil: orders are accepted without it, as UserTurn.Lock false.
	Locks *lock.Client
	// Shards tells a sale's shards and moves units between them
	// (stock.Keeper; activity.Shards). Nil: every sale is one shard.
	Shards Shards
}

// Shards is what the order path needs of a sharded sale's stock
// (stock.Keeper): how many shards it has, and units pulled into a shard
// that ran dry.
type Shards interface {
	// Shards is how many shards sale id has (1 for a sale of one, or one
	// Redis does not hold).
	Shards(ctx context.Context, id int64) (int, error)
	// Pull moves units into shard to of sale id so it has want: more
	// true to place the order again; false with left, what the sale holds
	// (0: a snapshot of every shard empty, sold out; more: all of it in
	// shard to, too few for want).
	Pull(ctx context.Context, id int64, to int, want int64) (more bool, left int64, err error)
}

// Orders keeps orders and groups in Redis: the order domain's Store.
type Orders struct {
	rdb     redis.UniversalClient
	cfg     Config
	cluster bool // an order's rate limit is its sale's, in the shard's slot (Accept)
	// pipe pipelines the scripts of concurrent requests together (place,
	// the group scripts, transitions): one socket write and read for many,
	// in the api and in Redis, and with acks one WAIT for the lot.
	// Measured with `make bench-strategy`: docs/benchmarks.md.
	pipe *redispipe.Pipe
}

// shardsOf is how many shards sale id has (Config.Shards).
func (s *Orders) shardsOf(ctx context.Context, id int64) (int, error) {
	if s.cfg.Shards == nil {
		return 1, nil
	}
	n, err := s.cfg.Shards.Shards(ctx, id)
	if err != nil {
		return 0, unavailable("shards", err)
	}
	return n, nil
}

// userKeys are the keys of the shard of sale id that user's orders are
// in (activity.ShardOf), and that shard.
func (s *Orders) userKeys(ctx context.Context, id, user int64) (rediskeys.Activity, error) {
	n, err := s.shardsOf(ctx, id)
	if err != nil {
		return rediskeys.Activity{}, err
	}
	return rediskeys.ForShard(id, activity.ShardOf(user, n), n), nil
}

// noKeys are the keys of the shard order (or group) no is in, and its
// activity.
func noKeys(no string) (rediskeys.Activity, error) {
	act, shard, shards, err := order.ParseNoShard(no)
	if err != nil {
		return rediskeys.Activity{}, err
	}
	return rediskeys.ForShard(act, shard, shards), nil
}

var _ order.Store = (*Orders)(nil)

// New returns the store on rdb. Close it to stop its pipe.
func New(rdb redis.UniversalClient, cfg Config) *Orders {
	if cfg.Ack.Probe == "" {
		cfg.Ack.Probe = rediskeys.AckProbe
	}
	_, cluster := rdb.(*redis.ClusterClient)
	return &Orders{rdb: rdb, cfg: cfg, cluster: cluster, pipe: redispipe.NewAcked(rdb, cfg.Ack)}
}

// unavailable is the order domain's error for a failed Redis call: not
// replicated in time, or Redis unreachable.
func unavailable(what string, err error) error {
	if errors.Is(err, redispipe.ErrNotReplicated) {
		return fmt.Errorf("%w: %s: %w", order.ErrNotReplicated, what, err)
	}
	return fmt.Errorf("%w: %s: %w", order.ErrUnavailable, what, err)
}

// Close sends the scripts still pending and stops the pipe; later calls
// go to Redis one by one.
func (s *Orders) Close() { s.pipe.Close() }
