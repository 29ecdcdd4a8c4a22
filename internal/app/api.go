package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/catalog"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/demo"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/waitingroom"
	"github.com/flashsale/flashsale/migrations"
)

// API is the api program: Run wires and starts it, Close stops it.
//
// With neither REDIS_URL nor MYSQL_DSN set it runs in embedded mode: its
// own Redis and MySQL (internal/embedded), and a worker inside the process.
type API struct {
	Config config.Config
	Logger *slog.Logger
	// Addr is where it listens, once Run returned.
	Addr string
	// Tokens issues shoppers' tokens (embedded mode prints one).
	Tokens *auth.Tokens
	// Out is where embedded mode prints its demo: the activities, tokens
	// and commands to try. Nil is os.Stderr.
	Out io.Writer
	// LogOutput is where the log goes (LOG_LEVEL, LOG_FORMAT). Nil is
	// os.Stderr.
	LogOutput io.Writer
	// TracerProvider, if set, traces the api (a test's in-memory exporter);
	// nil: from the environment (internal/tracing), off unless configured.
	TracerProvider trace.TracerProvider

	embedded *embedded.Stack
	demo     *demo.Demo
	stack    *stack
	presence *presence.Tracker
	hub      *stream.Hub
	worker   *Worker
	http     *httpapi.Server
	stop     context.CancelFunc
}

// NewAPI returns an API that reads its configuration from the environment.
func NewAPI() *API { return &API{Logger: slog.Default()} }

// Log is the program's logger.
func (m *API) Log() *slog.Logger { return m.Logger }

// Run loads the configuration, connects, migrates (in the background) and
// starts serving. It returns once the server is listening.
func (m *API) Run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	return m.RunWith(ctx, cfg)
}

// RunWith is Run with a given configuration.
func (m *API) RunWith(ctx context.Context, cfg config.Config) error {
	var err error
	m.Logger = newLogger(cfg, m.LogOutput)
	if err := config.CheckAdminToken(cfg.AdminToken); err != nil {
		return err // Load checks it; a Config made otherwise is checked here
	}
	switch {
	case cfg.RedisURL == "" && cfg.MySQLDSN == "" && cfg.RedisAckReplicas > 0:
		return errors.New("REDIS_ACK_REPLICAS needs replicas: the embedded Redis has none")
	case cfg.RedisURL == "" && cfg.MySQLDSN == "":
		cfg.PaymentProvider = cfg.Payments() // simulated unless chosen: decided before the servers' URLs are set
		if m.embedded, err = embedded.Start(m.Logger, embedded.Mode(cfg.EmbeddedMode)); err != nil {
			return err
		}
		cfg.RedisURL, cfg.MySQLDSN = m.embedded.RedisURL, m.embedded.MySQLDSN
		if cfg.AdminToken == "" {
			cfg.AdminToken = randomSecret()[:config.MinAdminTokenLen] // hex: 128 random bits
		}
		if cfg.JWTSecret == "" {
			cfg.JWTSecret = randomSecret()
		}
		// The demo's webhook receiver is on this machine too.
		cfg.WebhookAllowPrivate = true
		// Every local client (curl, ab, wrk) is 127.0.0.1: a per-IP limit
		// would refuse the printed load tests, so it is off unless asked for.
		if !cfg.RateLimitIPRPSSet {
			cfg.RateLimitIPRPS = 0
		}
		m.Logger.Warn("EMBEDDED MODE: REDIS_URL and MYSQL_DSN are not set, so Redis and MySQL run " +
			m.embeddedServers() + ", with a worker. Every activity and order is lost when it exits.")
	case cfg.RedisURL == "" || cfg.MySQLDSN == "":
		return errors.New("set both REDIS_URL and MYSQL_DSN, or neither for the embedded mode")
	}
	if err := cfg.CheckPayments(); err != nil {
		return err
	}
	m.Config = cfg
	if m.Tokens, err = auth.NewWithCache(cfg.JWTSecret, cfg.JWTCacheSize); err != nil {
		return fmt.Errorf("%w (set JWT_SECRET to a random string of 32 or more bytes)", err)
	}
	if cfg.AdminToken == "" {
		m.Logger.Warn("ADMIN_TOKEN is not set: the admin API refuses every request")
	}
	if m.stack, err = openStack(cfg, m.Logger, mysqlstore.WriteOptions{}); err != nil {
		return err
	}
	s := m.stack
	if m.embedded != nil {
		s.maxStock, s.maxStockReason = m.embedded.MaxStock, m.embedded.MaxStockReason
	}
	if s.traces, err = openTraces(ctx, m.TracerProvider, "flashsale-api"); err != nil {
		return err
	}

	bg, stop := context.WithCancel(context.Background())
	m.stop = stop
	// One catalog for the public view and for presence, which asks it
	// whether a heartbeat's activity may be watched (from memory or MySQL).
	cat := catalog.New(s.activities, s.stocks, catalog.Config{})
	m.presence = presence.New(s.conns.Redis, cat, presence.Config{TTL: cfg.PresenceTTL})
	checks := maps.Clone(s.checks) // its own: the migrations gate is the api's
	schema := httpapi.NewGate("the database schema is not migrated yet")
	checks["migrations"] = schema.Check
	if cfg.MigrateOnStart || m.embedded != nil {
		// MySQL being down at start must not keep the API from taking orders
		// (they only need Redis): migrate in the background, retrying; until
		// then the admin API answers UNAVAILABLE and /readyz says why.
		sqlDB, err := s.conns.DB.DB()
		if err != nil {
			return err
		}
		go migrateUntilDone(bg, sqlDB, m.Logger, schema)
	} else {
		schema.Open()
	}
	go s.stocks.WatchRestock(bg, m.Logger)

	admSecret := cfg.AdmissionSecret
	if admSecret == "" {
		admSecret = waitingroom.DeriveSecret(cfg.JWTSecret)
	}
	signer, err := waitingroom.NewSigner(admSecret)
	if err != nil {
		return err
	}
	queue := waitingroom.New(s.conns.Redis, signer)
	queue.Metrics = waitingroom.NewMetrics(s.reg)
	adm := s.admin().WithQueues(queueFigures{queue}) // the admin API and the embedded demo
	orders := s.apiOrderService()
	// The streams' hub: a subscription per shard, shared by every stream.
	m.hub = stream.NewHub(s.conns.Redis, stream.Config{Log: m.Logger})
	orderStreams := stream.NewOrders(m.hub, orders, s.hooks, stream.OrdersConfig{
		Accepted: acceptedEvent(cat, cfg.PaymentCurrency), ReadTimeout: cfg.RequestTimeout,
	})
	queueStreams := stream.NewQueue(m.hub, queue, stream.QueueConfig{Log: m.Logger, ReadTimeout: cfg.RequestTimeout})
	s.reg.MustRegister(stream.Collectors(m.hub, queueStreams)...)
	router := httpapi.NewRouter(httpapi.Deps{
		Logger:         m.Logger,
		Checks:         checks,
		Admin:          adm,
		AdminToken:     cfg.AdminToken,
		AdminGate:      schema,
		TrustedProxies: cfg.TrustedProxies,
		Metrics:        promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}),
		Registerer:     s.reg,
		Tracing:        s.traces.middleware("flashsale-api"),
		Locks:          s.locks,
		Webhooks:       s.hookSvc,
		RequestTimeout: cfg.RequestTimeout,
		Shop: &httpapi.Shop{
			Orders: orders, Payments: s.payments, Catalog: cat, Tokens: m.Tokens,
			Presence: m.presence, Queue: queue,
			Limiter: s.limiter, UserRPS: cfg.RateLimitUserRPS, IPRPS: cfg.RateLimitIPRPS,
			OrderStreams: orderStreams, QueueStreams: queueStreams, OpenTimeout: cfg.RequestTimeout,
		},
	})
	tokens, payments := m.Tokens, s.payments
	s.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_payment_events_foreign_total",
			Help: "Provider events of payments this service did not create (STRIPE_METADATA_TAG): ignored, never acted on."},
			func() float64 { return float64(payments.ForeignEvents()) }),
		outboxCollector{live: s.activities.LiveIDs, read: s.stocks.Read},
		waitingroom.QueueCollector{Live: s.activities.LiveIDs, Rdb: s.conns.Redis},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_auth_token_cache_hits_total",
			Help: "Bearer tokens answered from the verified-token cache (JWT_CACHE_SIZE)."},
			func() float64 { h, _ := tokens.CacheStats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_auth_token_cache_misses_total",
			Help: "Bearer tokens verified in full: not cached yet, evicted, expired, or invalid."},
			func() float64 { _, m := tokens.CacheStats(); return float64(m) }),
	)
	if m.http, err = httpapi.Listen(cfg.HTTPAddr, router, m.Logger); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	m.Addr = m.http.Addr()
	// Shutdown waits for responses in flight; a stream never ends by
	// itself, so the hub ends them all as it begins.
	m.http.OnShutdown(m.hub.Close)
	m.Logger.Info("api listening", "addr", m.Addr)
	if s.sim != nil {
		// The simulated provider confirms a payment in a webhook to this
		// very api, as a real provider would to the deployment's address.
		s.sim.SetWebhookURL("http://" + health.LocalAddr(m.Addr) + "/webhooks/" + s.sim.Name())
		m.Logger.Warn("PAYMENT_PROVIDER=simulated: orders are marked paid with no money taken (docs/payments.md)")
	}

	if m.embedded != nil {
		return m.startEmbedded(ctx, schema, adm)
	}
	return nil
}

// startEmbedded waits for the in-process SQL server's migrations (well
// under a second), then starts the worker and the demo, and announces them.
// A demo that cannot be set up is logged, not fatal.
func (m *API) startEmbedded(ctx context.Context, schema *httpapi.Gate, adm *admin.Service) error {
	if err := waitOpen(ctx, schema); err != nil {
		return fmt.Errorf("embedded mode: waiting for migrations: %w", err)
	}
	m.worker = &Worker{Logger: m.Logger,
		writes: mysqlstore.WriteOptions{Max: m.embedded.WriteBatch, Target: m.embedded.WriteTarget,
			SerialCommits: m.embedded.Mode == embedded.Memory}}
	wcfg := m.Config
	wcfg.WorkerHTTPAddr = "127.0.0.1:0"
	wcfg.DebugAddr = "" // the api's profiler sees the whole process
	if err := m.worker.RunWith(ctx, wcfg); err != nil {
		return fmt.Errorf("embedded worker: %w", err)
	}
	var err error
	m.demo, err = demo.Start(ctx, adm, m.Tokens, demo.Config{
		Addr: m.Addr, AdminToken: m.Config.AdminToken, UserRPS: m.Config.RateLimitUserRPS,
		IPRPS: m.Config.RateLimitIPRPS, IPDefaulted: !m.Config.RateLimitIPRPSSet, Servers: m.embeddedServers(),
	})
	if err != nil {
		m.Logger.Error("embedded mode: the demo activities were not set up", "err", err)
	}
	m.announce()
	return nil
}

// embeddedServers says where embedded mode's Redis and MySQL run.
func (m *API) embeddedServers() string {
	if m.embedded.Mode == embedded.Servers {
		return "as child processes of this one (redis-server and mariadbd, their files in " + m.embedded.Dir + ")"
	}
	return fmt.Sprintf("IN MEMORY inside this process (sales of at most %d units)", m.embedded.MaxStock)
}

// waitOpen waits until gate opens or ctx ends.
func waitOpen(ctx context.Context, gate *httpapi.Gate) error {
	for gate.Check(ctx) != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// migrateUntilDone applies pending migrations, retrying with backoff while
// MySQL cannot be reached, and opens gate when done.
func migrateUntilDone(ctx context.Context, db *sql.DB, log *slog.Logger, gate *httpapi.Gate) {
	backoff := 500 * time.Millisecond
	for {
		err := migrations.Up(ctx, db, log)
		if err == nil {
			gate.Open()
			return
		}
		log.Error("migrations failed; retrying", "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// announce prints what embedded mode needs to be tried: a log line with
// the tokens, then the demo's block of commands.
func (m *API) announce() {
	user, _ := m.Tokens.Issue(1, demo.TokenTTL)
	m.Logger.Info("embedded mode: try it",
		"ADMIN_TOKEN", m.Config.AdminToken, "user 1 token", user, "api", "http://"+health.LocalAddr(m.Addr))
	if m.demo == nil {
		return
	}
	out := m.Out
	if out == nil {
		out = os.Stderr
	}
	_, _ = io.WriteString(out, m.demo.Text())
}

// Close stops accepting requests, waits for those in flight up to the
// shutdown timeout, stops the embedded worker, closes the connections, and
// removes the embedded demo's files.
func (m *API) Close() error {
	var errs []error
	if m.http != nil {
		ctx, cancel := waitCtx(m.Config)
		errs = append(errs, m.http.Shutdown(ctx))
		cancel()
	}
	if m.hub != nil {
		m.hub.Close() // if the server never started; idempotent
	}
	if m.worker != nil {
		errs = append(errs, m.worker.Close())
	}
	if m.presence != nil {
		m.presence.Close() // writes what is pending while Redis is still connected
	}
	if m.stop != nil {
		m.stop()
	}
	if m.stack != nil {
		errs = append(errs, m.stack.close())
	}
	if m.embedded != nil {
		errs = append(errs, m.embedded.Close())
	}
	if m.demo != nil {
		errs = append(errs, m.demo.Close())
	}
	return errors.Join(errs...)
}

// queueFigures are the admin's figures of a waiting room
// (admin.Queues): waitingroom.Service.Stats.
type queueFigures struct{ svc *waitingroom.Service }

func (q queueFigures) QueueFigures(ctx context.Context, id int64) (admin.QueueFigures, error) {
	st, err := q.svc.Stats(ctx, id)
	if err != nil {
		return admin.QueueFigures{}, err
	}
	return admin.QueueFigures{Status: string(st.Status), Joined: st.Joined, Serving: st.Serving, Waiting: st.Waiting,
		AdmittedPerSecond: st.Admitted, EstimatedWait: st.EstimatedWait}, nil
}
