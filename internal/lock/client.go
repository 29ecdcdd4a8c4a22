package lock

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
)

// Config tunes a Client. The zero value gives the defaults written on each field.
type Config struct {
	// Prefix starts every Redis key and channel the client uses. Default "fs:".
	Prefix string
	// RecheckInterval is the longest a waiter sleeps without a release notice
	// before it tries again: it bounds what a lost notice can cost. Default 500ms.
	RecheckInterval time.Duration
	// FenceRetention is how long a key's fence counter outlives its last
	// obtain. Default 24h.
	FenceRetention time.Duration
	// SubscriptionLinger keeps an idle release subscription open this long
	// for the next waiter, to save SUBSCRIBE/UNSUBSCRIBE churn. Default 5s.
	SubscriptionLinger time.Duration
	// Host is recorded in holder metadata. Default os.Hostname().
	Host string

	// MaxHandoffs is how many times one hold of a mutex in Redis may pass
	// straight from a local holder to the next local waiter, without a
	// Redis round trip, before it is released in Redis. Default 63; a
	// negative value turns local handoff off.
	MaxHandoffs int
	// HandoffWindow is how long one hold of a mutex in Redis may keep
	// passing between local holders. Default 5ms.
	HandoffWindow time.Duration
	// Pipeline sends the mutex's scripts (obtain, release): concurrent
	// callers' together, one pipeline for many (internal/redispipe's Pipe
	// is one; the caller closes it after the Client). Nil sends each
	// script on its own round trip. See runScript for what it saves.
	Pipeline Pipeline

	// Metrics receives the locks' metrics; nil turns them off.
	Metrics *Metrics

	// FairWaiterLease is how long a fair-lock waiter keeps its place in the
	// queue without renewing it (it renews every third of it). A crashed
	// waiter is skipped this long after its last renewal, by Redis time.
	// Default 2s.
	FairWaiterLease time.Duration
	// YieldDelay is how long the next local waiter lets other clients try
	// first after a hold that used its handoff budget ended while they
	// waited. Default 2ms.
	YieldDelay time.Duration
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = defaultPrefix
	}
	if c.RecheckInterval <= 0 {
		c.RecheckInterval = 500 * time.Millisecond
	}
	if c.FenceRetention <= 0 {
		c.FenceRetention = 24 * time.Hour
	}
	// Redis rejects PX 0, and the scripts send whole milliseconds.
	c.FenceRetention = max(c.FenceRetention, time.Millisecond)
	if c.SubscriptionLinger <= 0 {
		c.SubscriptionLinger = 5 * time.Second
	}
	if c.MaxHandoffs == 0 {
		c.MaxHandoffs = 63
	}
	if c.HandoffWindow <= 0 {
		c.HandoffWindow = 5 * time.Millisecond
	}
	if c.FairWaiterLease <= 0 {
		c.FairWaiterLease = 2 * time.Second
	}
	c.FairWaiterLease = max(c.FairWaiterLease, 3*time.Millisecond)
	if c.YieldDelay <= 0 {
		c.YieldDelay = 2 * time.Millisecond
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	return c
}

// Pipeline sends scripts to the client's Redis, batching concurrent
// callers' (Config.Pipeline): a plain script's call, and a call of a merged
// script, which it may run with the concurrent calls of the same script and
// group as one (luascript.Merged).
type Pipeline interface {
	Run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd
	RunMerged(ctx context.Context, m *luascript.Merged, group string, keys []string, args ...any) *redis.Cmd
}

// Client obtains locks on one Redis deployment. It is safe for concurrent use.
// Close it to stop its release subscription.
type Client struct {
	rdb    redis.UniversalClient
	cfg    Config
	pid    string
	gates  gateSet
	notify *notifier
	pipe   Pipeline // Config.Pipeline; nil: each script on its own

	reentrantOnce sync.Once
	reentrant     *Reentrant
	fairOnce      sync.Once
	fair          *Fair
}

// New returns a Client with the default Config. A nil rdb gives a client whose
// every call fails with ErrInvalid.
//
// Give rdb ContextTimeoutEnabled so a context deadline also bounds a call to a
// stalled server; the watchdog does not depend on it.
func New(rdb redis.UniversalClient) *Client {
	return NewClient(rdb, Config{})
}

// NewClient returns a Client tuned by cfg.
func NewClient(rdb redis.UniversalClient, cfg Config) *Client {
	if isNil(rdb) {
		rdb = nil
	}
	cfg = cfg.withDefaults()
	c := &Client{
		rdb:    rdb,
		cfg:    cfg,
		pid:    strconv.Itoa(os.Getpid()),
		notify: newNotifier(rdb, cfg.SubscriptionLinger),
		pipe:   cfg.Pipeline,
	}
	return c
}

// config is c's Config; the zero Config for a nil c (whose calls fail with
// ErrInvalid rather than panic).
func (c *Client) config() Config {
	if c == nil {
		return Config{}
	}
	return c.cfg
}

// runScript runs a mutex script, through the Pipeline if there is one.
//
// Only the mutex batches. Measured (bench/, 2 cores): batching lifted every
// kind's uncontended rate (fair 26k→38k ops/s, reentrant 29k→48k) but cut
// their hot-key handoffs (fair 6.3k→4.1k/s, reentrant 7.8k→4.8k): their
// contended handoffs are chains of round trips, and a release queued behind
// another pipeline in flight waits for it. The mutex's hot key hands over
// inside the process and never meets that. Sending directly when nothing
// was in flight did not help either (it lost the uncontended gain).
func (c *Client) runScript(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if c.pipe != nil {
		return c.pipe.Run(ctx, s, keys, args...)
	}
	return s.Run(ctx, c.rdb, keys, args...)
}

// runMerged runs a call of a merged mutex script (a table's obtain or
// release): through the Pipeline, merged with the concurrent calls of the
// same script into one EVALSHA; without one, by itself.
func (c *Client) runMerged(ctx context.Context, m *luascript.Merged, keys []string, args ...any) *redis.Cmd {
	if c.pipe != nil {
		return c.pipe.RunMerged(ctx, m, "", keys, args...)
	}
	return m.Run(ctx, c.rdb, keys, args...)
}

func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close stops the client's release subscription. Locks already held keep
// being renewed until released. The Pipeline is the caller's to close.
func (c *Client) Close() error {
	return c.notify.close()
}
