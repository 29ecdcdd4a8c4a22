package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/webhook"
)

// transferGrace is how old a half-done transfer of units between a
// sale's shards must be before the reconciler finishes it: a live mover
// finishes its own within milliseconds (finishing one twice is harmless:
// the give is once per transfer id).
const transferGrace = 5 * time.Second

// Worker is the worker program: it records accepted orders in MySQL,
// cancels unpaid ones, and reconciles Redis with MySQL.
type Worker struct {
	Config config.Config
	Logger *slog.Logger
	// LogOutput is where the log goes when Logger is nil (LOG_LEVEL,
	// LOG_FORMAT). Nil is os.Stderr.
	LogOutput io.Writer
	// Addr is where /healthz, /readyz and /metrics are served, once Run returned.
	Addr string
	// TracerProvider, if set, traces the worker's syncs (a test's in-memory
	// exporter); nil: from the environment (internal/tracing).
	TracerProvider trace.TracerProvider

	// writes tunes its MySQL writes of orders: embedded mode's in-memory
	// server's (zero: mysqlstore's defaults).
	writes mysqlstore.WriteOptions

	stack *stack
	tasks *asynq.Server
	http  *httpapi.Server
	stop  context.CancelFunc
	done  chan struct{}
	// hookTasks delivers webhooks; hookDone closes when the dispatcher
	// stopped (startWebhooks).
	hookTasks *asynq.Server
	hookDone  chan struct{}
}

// NewWorker returns a Worker that reads its configuration from the environment.
func NewWorker() *Worker { return &Worker{Logger: slog.Default()} }

// Log is the program's logger.
func (m *Worker) Log() *slog.Logger { return m.Logger }

// Run loads the configuration, connects, and starts the task server, the
// reconciler and the operational HTTP endpoints.
func (m *Worker) Run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	m.Logger = newLogger(cfg, m.LogOutput)
	if cfg.RedisURL == "" || cfg.MySQLDSN == "" {
		return errors.New("set REDIS_URL and MYSQL_DSN (the embedded mode runs a worker inside the api)")
	}
	return m.RunWith(ctx, cfg)
}

// RunWith is Run with a given configuration.
func (m *Worker) RunWith(ctx context.Context, cfg config.Config) error {
	if err := cfg.CheckPayments(); err != nil {
		return err
	}
	m.Config = cfg
	if m.Logger == nil {
		m.Logger = newLogger(cfg, m.LogOutput)
	}
	var err error
	if m.stack, err = openStack(cfg, m.Logger, m.writes); err != nil {
		return err
	}
	s := m.stack
	if s.traces, err = openTraces(ctx, m.TracerProvider, "flashsale-worker"); err != nil {
		return err
	}

	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_task_failures_total",
		Help: "Task runs that failed, by type and whether they will be retried (final=false) or were archived (final=true).",
	}, []string{"type", "final"})
	s.reg.MustRegister(failures, tasks.QueueCollector(asynq.NewInspectorFromRedisClient(s.conns.Redis)))
	m.tasks = asynq.NewServerFromRedisClient(s.conns.Redis, asynq.Config{
		// Failed tasks are retried with tasks.RetryDelay; one that returns
		// asynq.SkipRetry (or runs out of retries) is archived, where
		// "asynq task ls --queue orders --state archived" shows it.
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			final := errors.Is(err, asynq.SkipRetry)
			failures.WithLabelValues(t.Type(), strconv.FormatBool(final)).Inc()
			if final {
				m.Logger.Error("task failed for good; archived", "type", t.Type(), "payload", string(t.Payload()), "err", err)
			} else {
				m.Logger.Warn("task failed; will retry", "type", t.Type(), "err", err)
			}
		}),
		Concurrency:    cfg.WorkerConcurrency,
		Queues:         map[string]int{tasks.QueueName: 10, "default": 1},
		RetryDelayFunc: tasks.RetryDelay,
		// Scheduled tasks (payment timeouts) become due within a second, not
		// asynq's default five.
		DelayedTaskCheckInterval: time.Second,
		Logger:                   logging.Asynq{Log: m.Logger},
		ShutdownTimeout:          cfg.ShutdownTimeout,
	})
	mux := asynq.NewServeMux()
	// The worker's follow-ups — its handlers' own and those of the Service
	// it runs expiries and settlements with — go to the durable queue: the
	// types (tasks.Durable, tasks.DurableService) keep the api's in-memory
	// relay out.
	svc := tasks.NewDurableService(s.orderDeps(), s.orderConfig(), s.queue)
	s.payments.UseOrders(svc.Orders())
	tasks.NewWorker(svc, s.orderStore, s.orders, s.queue, m.Logger).WithPayments(s.payments).WithMetrics(s.reg).
		WithTracer(s.traces.tracer("flashsale/worker")).Register(mux)
	tasks.NewPaymentWorker(s.payments, s.payRecs, m.Logger).Register(mux)
	if err := m.tasks.Start(mux); err != nil {
		return fmt.Errorf("start task server: %w", err)
	}

	bg, stop := context.WithCancel(context.Background())
	m.stop, m.done = stop, make(chan struct{})
	rec := tasks.NewReconciler(s.locks, s.orderStore, s.queue, s.orders, s.activities.LiveIDs, m.Logger, s.reg)
	rec.Payments = s.payments
	rec.Pending = s.orders.PendingBefore
	rec.Transfers = func(ctx context.Context, id int64) (int, error) {
		return s.stocks.Settle(ctx, id, transferGrace)
	}
	rec.SoldOut = s.shardedSoldOut()
	audit := s.admin()
	rec.Rules = audit.Repair
	rec.Audit = func(ctx context.Context, id int64) (int, error) {
		d, err := audit.Sample(ctx, id) // and keeps the figures for the console's charts
		return len(d.Reconciliation.Problems), err
	}
	go func() { defer close(m.done); rec.Run(bg) }()
	if err := m.startWebhooks(bg); err != nil {
		return fmt.Errorf("start webhook deliveries: %w", err)
	}

	router := httpapi.NewOpsRouter(m.Logger, s.checks)
	router.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	if m.http, err = httpapi.Listen(cfg.WorkerHTTPAddr, router, m.Logger); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.WorkerHTTPAddr, err)
	}
	m.Addr = m.http.Addr()
	m.Logger.Info("worker running", "addr", m.Addr)
	return nil
}

// Close stops taking tasks, lets running ones finish up to the shutdown
// timeout, and closes the connections.
func (m *Worker) Close() error {
	var errs []error
	if m.tasks != nil {
		m.tasks.Shutdown()
	}
	if m.hookTasks != nil {
		m.hookTasks.Shutdown()
	}
	if m.stop != nil {
		m.stop()
		<-m.done
		if m.hookDone != nil {
			<-m.hookDone
		}
	}
	if m.http != nil {
		ctx, cancel := waitCtx(m.Config)
		errs = append(errs, m.http.Shutdown(ctx))
		cancel()
	}
	if m.stack != nil {
		errs = append(errs, m.stack.close())
	}
	return errors.Join(errs...)
}

// shardedSoldOut is the reconciler's record of a sharded sale's sell-out
// (tasks.Reconciler.SoldOut): once a snapshot proves every shard empty at
// the sale's version (stock.Keeper.SoldOutNow), activity.sold_out with
// that version as its sequence goes into the outbox, in a transaction of
// its own: the same id for the same version, so a second pass or another
// worker appends nothing twice. A version recorded is remembered, so a sale
// that stays sold out costs one Redis read a pass, not a MySQL write.
func (s *stack) shardedSoldOut() func(ctx context.Context, id int64) (bool, error) {
	var mu sync.Mutex
	done := map[int64]int64{} // activity -> version recorded
	return func(ctx context.Context, id int64) (bool, error) {
		v, ok, err := s.stocks.SoldOutNow(ctx, id)
		if err != nil || !ok {
			return false, err
		}
		mu.Lock()
		seen := done[id] == v
		mu.Unlock()
		if seen {
			return false, nil
		}
		a, err := s.activities.Get(ctx, id)
		if err != nil {
			return false, err
		}
		a.Status, a.Version = activity.Published, v
		if err := s.hooks.Append(ctx, webhook.ActivityEvent(webhook.ActivitySoldOut, a, time.Now())); err != nil {
			return false, err
		}
		mu.Lock()
		done[id] = v
		mu.Unlock()
		return true, nil
	}
}
