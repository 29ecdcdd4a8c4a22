// Package app is the two programs, the API and the worker, wired from their
// configuration: cmd/api and cmd/worker run them, and end-to-end tests run
// them in-process or as child processes. All wiring lives here.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/stripepay"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/webhook"
)

// stack is what both programs build on: connections and the services over
// them.
type stack struct {
	cfg        config.Config
	log        *slog.Logger
	reg        *registry
	conns      *connect.Conns
	locks      *lock.Client
	stocks     *stock.Keeper
	activities *mysqlstore.Activities
	orders     *mysqlstore.Orders
	orderStore *redisstore.Orders
	// records reads orders' records for the admin's reconciliation
	// without waiting for replicas (no Ack): it reports what the primary
	// holds and records nothing, and must answer while a replica is down.
	records *redisstore.Orders
	tasks   *asynq.Client
	queue   *tasks.Queue // durable: the worker's follow-ups, and the relay's sends
	relay   *tasks.Relay // the api's only (newRelay): batched, off the request path
	traces  traces       // set by the program after openStack (openTraces)
	// pipe pipelines the locks' and the rate limiter's scripts: one
	// pipeline for the requests in flight rather than a round trip each.
	// (The order store has a pipe of its own, acknowledged by the replicas
	// when REDIS_ACK_REPLICAS asks: a lock or a rate limit needs no WAIT.)
	pipe    *redispipe.Pipe
	limiter *redisstore.Limiter
	debug   net.Listener // DEBUG_ADDR's profiler, if on
	// provider takes the shoppers' money (PAYMENT_PROVIDER); sim is it
	// when it is the simulated one (the api tells it where its webhooks go).
	provider payment.Provider
	sim      *paysim.Provider
	payments *payment.Service
	payRecs  *mysqlstore.Payments
	// hooks is the webhooks' outbox, endpoints and delivery log; hookQueue
	// queues deliveries, hookSvc is the endpoints' admin (openWebhooks).
	hooks     *mysqlstore.Webhooks
	hookQueue *tasks.WebhookQueue
	hookSvc   *webhook.Service
	// hookRedis is where the deliveries' tasks live: WEBHOOK_REDIS_URL's
	// server, or the stack's Redis (hookRedisOwn then false).
	hookRedis    redis.UniversalClient
	hookRedisOwn bool
	// checks are the dependencies /readyz and flashsale_dependency_up
	// report: the connections', and WEBHOOK_REDIS_URL's server when set.
	checks map[string]health.Check
	// publisher publishes to the streams' hubs (stream.Publisher): the
	// worker's committed order events, the admin's nudges of a waiting room.
	publisher *stream.Publisher
	// maxStock and maxStockReason bound a sale's units (admin.Config):
	// embedded mode's in-memory servers' (embedded.Stack.MaxStock).
	maxStock       int
	maxStockReason string
}

// newLogger is the program's logger, writing to w (nil: os.Stderr), and
// slog's default.
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	log := logging.New(w, cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(log)
	return log
}

// openStack connects and builds the services; writes tunes the worker's
// MySQL writes of orders (zero: mysqlstore's defaults).
func openStack(cfg config.Config, log *slog.Logger, writes mysqlstore.WriteOptions) (*stack, error) {
	conns, err := connect.Open(cfg.RedisURL, connect.RedisMode{Cluster: cfg.RedisCluster, SentinelMaster: cfg.RedisSentinelMaster}, cfg.MySQLDSN)
	if err != nil {
		return nil, err
	}
	// REDIS_ACK_REPLICAS: changes are reported, and written to MySQL, only
	// once that many replicas hold them.
	ack := redispipe.Ack{Replicas: cfg.RedisAckReplicas, Timeout: cfg.RedisAckTimeout}
	reg := newRegistry()
	checks := conns.Checks()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		health.Collector(checks))
	reg.MustRegister(redispipe.Collectors()...)
	pipe := redispipe.New(conns.Redis)
	locks := lock.NewClient(conns.Redis, lock.Config{Prefix: rediskeys.LockPrefix, Metrics: lock.NewMetrics(reg), Pipeline: pipe})
	stocks := stock.New(conns.Redis, stock.Config{Ack: ack, SoldOutTTL: cfg.SoldOutTTL})
	s := &stack{
		cfg: cfg, log: log, reg: reg, conns: conns, checks: checks, pipe: pipe, locks: locks,
		stocks:     stocks,
		activities: mysqlstore.NewActivities(conns.DB),
		orders:     mysqlstore.NewOrdersWith(conns.DB, withCurrency(writes, cfg.PaymentCurrency)),
		orderStore: redisstore.New(conns.Redis, redisstore.Config{Ack: ack, Locks: locks, Shards: stocks}),
		records:    redisstore.New(conns.Redis, redisstore.Config{Shards: stocks}),
		tasks:      asynq.NewClientFromRedisClient(conns.Redis),
		limiter:    redisstore.NewLimiter(conns.Redis, pipe),
	}
	if s.debug, err = serveDebug(cfg.DebugAddr, log); err != nil {
		_ = s.locks.Close()
		_ = conns.Close()
		return nil, fmt.Errorf("DEBUG_ADDR %s: %w", cfg.DebugAddr, err)
	}
	s.queue = tasks.NewQueue(s.tasks)
	// The order streams (docs/streams.md) hear of each committed batch's
	// events: one publish a batch, after its transaction. A publish that
	// fails loses nothing: a stream reads the outbox when its hub resyncs
	// or its client reconnects.
	pub := stream.NewPublisher(conns.Redis)
	s.publisher = pub
	s.orders.OnCommit = func(ctx context.Context, events []webhook.Event) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := pub.Publish(pctx, events); err != nil {
			log.Warn("order events not published to the streams", "events", len(events), "err", err)
		}
	}
	s.payRecs = mysqlstore.NewPayments(conns.DB)
	if err := s.openWebhooks(); err != nil {
		_ = s.close()
		return nil, err
	}
	if writes.SerialCommits {
		s.hooks.SerialCommits()
	}
	if err := s.openPayments(); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// withCurrency is w with the orders' currency their events report
// (PAYMENT_CURRENCY).
func withCurrency(w mysqlstore.WriteOptions, currency string) mysqlstore.WriteOptions {
	w.Currency = currency
	return w
}

// openPayments builds the payment provider (PAYMENT_PROVIDER) and the
// payment service over it; its Orders are set by the program that builds
// the order service (payment.Service.UseOrders).
func (s *stack) openPayments() error {
	switch s.cfg.Payments() {
	case config.PaymentStripe:
		s.provider = stripepay.New(stripepay.Config{
			SecretKey: s.cfg.StripeSecretKey, WebhookSecret: s.cfg.StripeWebhookSecret, APIURL: s.cfg.StripeAPIURL,
			Tag: s.cfg.StripeMetadataTag,
		})
	case config.PaymentSimulated:
		s.sim = paysim.New(paysim.Config{Secret: s.cfg.SimulatedWebhookSecret, RefundLog: s.cfg.SimulatedRefundLog})
		s.provider = s.sim
	default:
		return fmt.Errorf("PAYMENT_PROVIDER %q: want stripe or simulated", s.cfg.PaymentProvider)
	}
	s.payments = payment.NewService(payment.Deps{
		Provider: s.provider, Store: s.orderStore.Payments(), Tasks: tasks.NewPaymentQueue(s.tasks),
		Records: s.payRecs, Log: s.log,
	}, payment.Config{Currency: s.cfg.PaymentCurrency})
	return nil
}

// admin is the admin use cases on this stack (the api's admin API and
// demo, the worker's audit).
func (s *stack) admin() *admin.Service {
	return admin.New(s.activities, s.stocks, s.orders, s.records, admin.Config{MaxStock: s.maxStock, MaxStockReason: s.maxStockReason,
		Loaded: s.nudgeQueue}).
		WithSamples(redisstore.NewSamples(s.conns.Redis))
}

// nudgeQueue tells every api's waiting-room watcher of a (a sale with a
// waiting room whose rules an admin change just loaded: closed, paused,
// resumed, a new rate) to read its counters now: its waiting shoppers'
// streams hear of a close within the publish, not the next tick (250 ms).
// A nudge lost is the tick's delay, no more: logged, not returned.
func (s *stack) nudgeQueue(ctx context.Context, a activity.Activity) {
	if !a.WaitingRoom || s.publisher == nil {
		return
	}
	if err := s.publisher.NudgeQueue(ctx, a.ID); err != nil {
		s.log.Warn("waiting room: the queue's watchers not nudged; they read at their next tick", "activity", a.ID, "err", err)
	}
}

// orderDeps are the order Service's collaborators but its Tasks, which
// each program gives its own: the api its relay (apiOrderService), the
// worker the durable queue (tasks.NewDurableService, whose type keeps the
// relay out of the worker).
func (s *stack) orderDeps() order.Deps {
	return order.Deps{
		Store: s.orderStore, Locks: redisstore.Locks{Locker: s.locks}, Limits: s.limiter,
		Records: s.orders, SoldOut: s.stocks, Payments: s.payments, Log: s.log,
	}
}

func (s *stack) orderConfig() order.Config {
	return order.Config{NoUserLock: !s.cfg.OrderUserLock, HoldUserLock: s.cfg.OrderUserLockHold, UserRPS: s.cfg.RateLimitUserRPS,
		Tracer: s.traces.tracer("flashsale/order")}
}

// apiOrderService is the api's order Service: its tasks go out in batches,
// off the request path, through a relay (tasks.Relay) that close sends
// what is left of.
func (s *stack) apiOrderService() *order.Service {
	s.relay = tasks.NewRelay(s.queue, s.log)
	d := s.orderDeps()
	d.Tasks = s.relay
	orders := order.NewService(d, s.orderConfig())
	s.payments.UseOrders(orders)
	return orders
}

func (s *stack) close() error {
	var errs []error
	// s.tasks is not closed: an asynq.Client made from a shared go-redis
	// client returns "redis connection is shared so the Client can't be
	// closed through asynq" from Close; closing the connection is enough.
	if s.debug != nil {
		_ = s.debug.Close()
	}
	if s.traces.shutdown != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, s.traces.shutdown(ctx)) // the spans still buffered
		cancel()
	}
	if s.relay != nil {
		s.relay.Close() // sends what is waiting while Redis is still connected
	}
	s.orderStore.Close()
	s.records.Close()
	s.orders.Close() // writes what is waiting while MySQL is still connected
	if s.hooks != nil {
		s.hooks.Close() // the delivery log's rows still waiting, likewise
	}
	if s.hookRedisOwn {
		errs = append(errs, s.hookRedis.Close())
	}
	errs = append(errs, s.locks.Close())
	s.pipe.Close() // after the locks: a lock held at close is released through it
	errs = append(errs, s.conns.Close())
	return errors.Join(errs...)
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitCtx is a context for closing things: the shutdown timeout.
func waitCtx(cfg config.Config) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
}
