// Package redisstore keeps live orders and groups in Redis, next to their
// activity's stock, and is the order domain's Redis adapter: it implements
// order.Store with one atomic Lua script per decision (scripts/, each headed
// by its KEYS, ARGV and returns), the worker's reads and marks on the
// orders and the outbox, and order.Locker over internal/lock (Locks).
//
// Every key of an order or group shares its activity's hash tag (keys come
// from internal/rediskeys; order numbers and group ids embed the activity
// id), so each script touches one Redis Cluster slot. The scripts share the
// sale's rules with internal/stock's lib_sale.lua.
package redisstore

import (
	"embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/stock"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

var (
	lua              = luascript.New(scriptFiles, "scripts", stock.Lua)
	openGroupScript  = lua.Script("open_group")
	joinGroupScript  = lua.Script("join_group")
	settleScript     = lua.Script("settle_group")
	transitionScript = lua.Script("transition")
	persistedScript  = lua.Script("persisted")
	// accept.lua is written for a batch of concurrent accepts: acceptMerged
	// runs it alone, acceptFinish as the per-user lock's finish — the
	// accepts and the locks' releases in one script (Store.Accept).
	acceptMerged = luascript.NewMerged(mustSource("accept"))
	acceptFinish = lock.NewBatchFinish(mustSource("accept"))
	// read_order.lua reads an order refused by the rate limit back,
	// concurrent refusals' reads merged (Store.Accept).
	readOrderMerged = luascript.NewMerged(mustSource("read_order"))
)

// mustSource is a script's source with its libraries; a missing one is a
// build mistake, caught by every test.
func mustSource(name string) string {
	src, err := lua.Source(name)
	if err != nil {
		panic(err)
	}
	return src
}

// Config tunes a Store. The zero value gives the defaults in the comments.
//
// How long records are kept is not the Store's to say: every key of a sale
// — its orders, their Idempotency-Keys, its groups — expires with the
// sale's keys (load.lua: activity.LiveUntil, retention after the last
// moment an order can still change).
type Config struct {
	// Ack is how many replicas must confirm a change before it is reported
	// (REDIS_ACK_REPLICAS, REDIS_ACK_TIMEOUT); none by default.
	Ack redispipe.Ack
}

// Store keeps orders and groups in Redis.
type Store struct {
	rdb redis.UniversalClient
	cfg Config
	// batch pipelines the scripts of concurrent requests together (accept,
	// the group scripts, transitions): one socket write and read for many,
	// in the api and in Redis, and with acks one WAIT for the lot. Measured
	// with `make bench-strategy`: docs/benchmarks.md.
	batch *redispipe.Pipe
}

var _ order.Store = (*Store)(nil)

// New returns the store on rdb. Close it to stop its batcher.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Ack.Probe == "" {
		cfg.Ack.Probe = rediskeys.AckProbe
	}
	return &Store{rdb: rdb, cfg: cfg, batch: redispipe.NewAcked(rdb, cfg.Ack)}
}

// unavailable is the order domain's error for a failed Redis call: not
// replicated in time, or Redis unreachable.
func unavailable(what string, err error) error {
	if errors.Is(err, redispipe.ErrNotReplicated) {
		return fmt.Errorf("%w: %s: %w", order.ErrNotReplicated, what, err)
	}
	return fmt.Errorf("%w: %s: %w", order.ErrUnavailable, what, err)
}

// Close sends the accepts still pending and stops the batcher; later calls
// go to Redis one by one.
func (s *Store) Close() { s.batch.Close() }
