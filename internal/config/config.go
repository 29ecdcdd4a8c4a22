// Package config reads the service's settings from environment variables. It
// is the only place that reads the environment.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config holds every setting of cmd/api and cmd/worker. The default of each
// field is in its envDefault tag; docs/config.md lists them all (a test
// checks it).
type Config struct {
	// HTTPAddr is where the API listens.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// WorkerHTTPAddr is where the worker serves /healthz, /readyz and /metrics.
	WorkerHTTPAddr string `env:"WORKER_HTTP_ADDR" envDefault:":8081"`
	// DebugAddr, if set, serves Go's profiler (net/http/pprof) there, for
	// operators; keep it on loopback or a private network.
	DebugAddr string `env:"DEBUG_ADDR"`
	// RedisURL is the Redis server, e.g. redis://127.0.0.1:6379/0.
	RedisURL string `env:"REDIS_URL"`
	// RedisCluster reads REDIS_URL as a Redis Cluster's seed nodes,
	// redis://[user:pass@]host1:port1?addr=host2:port2&addr=host3:port3
	// (go-redis's ParseClusterURL form; no database number).
	RedisCluster bool `env:"REDIS_CLUSTER" envDefault:"false"`
	// RedisSentinelMaster switches to Sentinel mode: REDIS_URL then lists
	// the sentinels, redis://[user:pass@]s1:26379?addr=s2:26379&addr=s3:26379,
	// and this is the name they know the primary by.
	RedisSentinelMaster string `env:"REDIS_SENTINEL_MASTER"`
	// RedisAckReplicas is how many replicas must hold a change before the
	// API reports it (an order accepted, a group opened or joined, a pay, a
	// cancel, a publish or close), checked with Redis's WAIT, one per
	// pipeline of concurrent requests; and before the worker writes what it
	// read into MySQL. 0 (the default) reports a change once the primary
	// has it.
	RedisAckReplicas int `env:"REDIS_ACK_REPLICAS" envDefault:"0"`
	// RedisAckTimeout bounds the wait for those replicas; past it the
	// answer is 503 UNAVAILABLE with Retry-After, never a success.
	RedisAckTimeout time.Duration `env:"REDIS_ACK_TIMEOUT" envDefault:"500ms"`
	// RequestTimeout bounds a request to /v1 and /admin/v1: past it the
	// request's context ends (Redis calls, locks, MySQL and the batched
	// scripts honour it) and the answer is 503 UNAVAILABLE with
	// Retry-After, so a frozen or unreachable primary cannot hold a client
	// for go-redis's read timeout times its retries. Longer than
	// REDIS_ACK_TIMEOUT; at most 60s.
	RequestTimeout time.Duration `env:"REQUEST_TIMEOUT" envDefault:"3s"`
	// MySQLDSN is the MySQL database in go-sql-driver form,
	// e.g. root:pw@tcp(127.0.0.1:3306)/flashsale.
	MySQLDSN string `env:"MYSQL_DSN"`
	// EmbeddedMode is how embedded mode (neither REDIS_URL nor MYSQL_DSN)
	// runs Redis and MySQL: auto (servers when redis-server and mariadbd
	// are installed, else memory), servers (redis-server and mariadbd as
	// child processes) or memory (in the process; its sales are limited to
	// embedded.MaxMemoryStock units, 2,000).
	EmbeddedMode string `env:"EMBEDDED_MODE" envDefault:"auto"`
	// AdminToken is the bearer token of the admin API (/admin/v1): at least
	// MinAdminTokenLen bytes. Empty closes the admin API (embedded mode
	// makes one up and prints it).
	AdminToken string `env:"ADMIN_TOKEN"`
	// MigrateOnStart applies pending migrations when the API starts (under a
	// lock, so replicas starting together do not race).
	MigrateOnStart bool `env:"MIGRATE_ON_START" envDefault:"true"`
	// JWTSecret signs and checks the shoppers' HS256 tokens; at least 32
	// bytes. Required unless embedded mode (which makes one up).
	JWTSecret string `env:"JWT_SECRET"`
	// AdmissionSecret signs and checks the waiting rooms' admission tokens
	// and proof-of-work challenges (docs/waiting-room.md); at least 32
	// bytes. Empty: derived from JWTSecret (an HMAC of it), the same in every
	// api of a deployment.
	AdmissionSecret string `env:"ADMISSION_SECRET"`
	// JWTCacheSize is how many verified tokens the API remembers until they
	// expire (auth.Tokens); 0 verifies every request afresh.
	JWTCacheSize int `env:"JWT_CACHE_SIZE" envDefault:"131072"`
	// RateLimitUserRPS is requests a second allowed per user; 0 is no limit.
	RateLimitUserRPS int `env:"RATE_LIMIT_USER_RPS" envDefault:"10"`
	// RateLimitIPRPS is requests a second allowed per client IP; 0 is no limit.
	RateLimitIPRPS int `env:"RATE_LIMIT_IP_RPS" envDefault:"100"`
	// RateLimitIPRPSSet says RATE_LIMIT_IP_RPS was given (not empty) rather
	// than defaulted: embedded mode, where every local client is 127.0.0.1,
	// turns the per-IP limit off unless it was.
	RateLimitIPRPSSet bool
	// TrustedProxies are the addresses (IPs or CIDRs, comma-separated) of the
	// reverse proxies in front of the API: only a request from one of them has
	// its X-Forwarded-For believed for the client IP. Empty (the default):
	// the client IP is the connection's, so nobody can dodge the per-IP limit
	// by sending that header.
	TrustedProxies []string `env:"TRUSTED_PROXIES" envSeparator:","`
	// OrderUserLock takes the per-(activity, user) lock around placing an
	// order; false only to measure what it costs.
	OrderUserLock bool `env:"ORDER_USER_LOCK" envDefault:"true"`
	// OrderUserLockHold takes the per-user lock for every order, where by
	// default the accept takes it only when someone holds it (lock
	// elision, docs/locking.md): only to measure what eliding saves.
	OrderUserLockHold bool `env:"ORDER_USER_LOCK_HOLD" envDefault:"false"`
	// SoldOutTTL is how long an api refuses a sale (or an item) it saw sell
	// out without asking Redis, when no restock notice clears the flag
	// first (stock.Config.SoldOutTTL): what a lost notice costs.
	SoldOutTTL time.Duration `env:"SOLD_OUT_TTL" envDefault:"1s"`
	// PresenceTTL is how long a shopper's app or device counts as online
	// after its last heartbeat (POST /v1/presence).
	PresenceTTL time.Duration `env:"PRESENCE_TTL" envDefault:"300s"`
	// PaymentProvider is who takes the shoppers' money: "stripe"
	// (STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET), or "simulated" (no money
	// moves: the demo and load tests; docs/payments.md). Empty: simulated
	// in embedded mode; against real servers (REDIS_URL, MYSQL_DSN) the api
	// and the worker refuse to start until it is chosen.
	PaymentProvider string `env:"PAYMENT_PROVIDER"`
	// PaymentCurrency is every order's currency, ISO 4217.
	PaymentCurrency string `env:"PAYMENT_CURRENCY" envDefault:"cny"`
	// StripeSecretKey is the Stripe API key ("sk_…").
	StripeSecretKey string `env:"STRIPE_SECRET_KEY"`
	// StripeWebhookSecret verifies Stripe's webhooks ("whsec_…").
	StripeWebhookSecret string `env:"STRIPE_WEBHOOK_SECRET"`
	// StripeAPIURL is where Stripe's API is; empty: Stripe's own
	// (stripe-mock's address in tests).
	StripeAPIURL string `env:"STRIPE_API_URL"`
	// StripeMetadataTag marks the PaymentIntents this service creates
	// (metadata created_by): events of any other PaymentIntent on the
	// account are ignored and counted, never acted on. Give each
	// deployment that shares a Stripe account its own.
	StripeMetadataTag string `env:"STRIPE_METADATA_TAG" envDefault:"flashsale"`
	// SimulatedWebhookSecret signs and verifies the simulated provider's
	// webhooks, and derives its payment ids; empty: a random one per
	// process (every api confirms its own payments). Set one for all the
	// apis so that a pay retried on another names the same payment, and to
	// send the api webhooks from outside (the soak's late payments and
	// replays).
	SimulatedWebhookSecret string `env:"SIMULATED_WEBHOOK_SECRET"`
	// SimulatedRefundLog is a file every process's simulated provider
	// appends its refunds to (one line each: payment, refund, key), for a
	// checker outside them to count a payment's refunds across processes
	// (the soak's money invariants, paysim.RefundLog); empty: none.
	SimulatedRefundLog string `env:"SIMULATED_REFUND_LOG"`
	// WebhookAllowPrivate lets webhook endpoints be on private and loopback
	// addresses (tests, embedded mode, a receiver on the shop's own
	// network); false refuses them when an endpoint is set and when a
	// delivery connects (docs/webhooks.md). Embedded mode turns it on.
	WebhookAllowPrivate bool `env:"WEBHOOK_ALLOW_PRIVATE" envDefault:"false"`
	// WebhookTimeout bounds one delivery attempt, from dialling to the
	// answer's status line; past it the attempt failed.
	WebhookTimeout time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"10s"`
	// WebhookConcurrency is how many deliveries a worker makes at once, on
	// a task server of their own (never an order task's slot).
	WebhookConcurrency int `env:"WEBHOOK_CONCURRENCY" envDefault:"32"`
	// WebhookEndpointConcurrency is how many of those may go to one
	// endpoint at once: a slow endpoint takes no more.
	WebhookEndpointConcurrency int `env:"WEBHOOK_ENDPOINT_CONCURRENCY" envDefault:"8"`
	// WebhookRetrySchedule is the waits between a delivery's attempts, the
	// first attempt at once (Svix's: eight attempts over 27 h 35 min),
	// each wait ±10% at random.
	WebhookRetrySchedule []time.Duration `env:"WEBHOOK_RETRY_SCHEDULE" envSeparator:"," envDefault:"5s,5m,30m,2h,5h,10h,10h"`
	// WebhookRotationWindow is how long an endpoint's secret before a
	// rotation still signs deliveries, beside the new one.
	WebhookRotationWindow time.Duration `env:"WEBHOOK_ROTATION_WINDOW" envDefault:"24h"`
	// WebhookDispatchInterval is how often the worker's dispatcher looks
	// for new events when it found none (at once after a full batch).
	WebhookDispatchInterval time.Duration `env:"WEBHOOK_DISPATCH_INTERVAL" envDefault:"200ms"`
	// WebhookRetention is how long the outbox's dispatched events and the
	// delivery log's attempts are kept; the worker's dispatcher prunes what
	// is older, and a recovery reaches back this far at most. Longer than
	// the retry schedule (a delivery on its schedule keeps its log).
	WebhookRetention time.Duration `env:"WEBHOOK_RETENTION" envDefault:"720h"`
	// WebhookRepairWindow is how far back the dispatcher's leader looks
	// for deliveries whose tasks Redis lost, when the Redis it queues into
	// changed (restarted, failed over) and when it begins to lead: at
	// least the longest a cut-off primary may keep taking writes before its
	// sentinels' failover (docs/webhooks.md, "Redis lost what it was given").
	WebhookRepairWindow time.Duration `env:"WEBHOOK_REPAIR_WINDOW" envDefault:"5m"`
	// WebhookRedisURL, when set, is a Redis of the deliveries' own (a plain
	// server: redis:// or rediss://): their tasks, about 12 µs of a Redis
	// main thread a delivery to one endpoint, stay off the sales' Redis.
	// Empty: REDIS_URL's.
	WebhookRedisURL string `env:"WEBHOOK_REDIS_URL"`
	// WebhookSecretKey encrypts endpoints' secrets at rest (AES-256-GCM):
	// 32 bytes in base64 (openssl rand -base64 32). Empty: stored as they
	// are, with a warning at start.
	WebhookSecretKey string `env:"WEBHOOK_SECRET_KEY"`
	// WebhookSecretKeyOld is the key before a rotation of
	// WebhookSecretKey: it only opens secrets, until
	// `api encrypt-webhook-secrets` has sealed them all under the new one.
	WebhookSecretKeyOld string `env:"WEBHOOK_SECRET_KEY_OLD"`
	// WorkerConcurrency is how many tasks a worker runs at once.
	WorkerConcurrency int `env:"WORKER_CONCURRENCY" envDefault:"64"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
	// LogFormat is text or json.
	LogFormat string `env:"LOG_FORMAT" envDefault:"text"`
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

// MinAdminTokenLen is the shortest ADMIN_TOKEN accepted, in bytes: what
// JWT_SECRET needs too (auth.MinSecretLen). `openssl rand -hex 16` makes
// one of 32 hex digits, 128 random bits.
const MinAdminTokenLen = 32

// CheckAdminToken says why token cannot be ADMIN_TOKEN, or nil: empty (the
// admin API closed) or at least MinAdminTokenLen bytes. Load checks it;
// so does the api with a token it makes up.
func CheckAdminToken(token string) error {
	if token != "" && len(token) < MinAdminTokenLen {
		return fmt.Errorf("config: ADMIN_TOKEN is %d bytes: want at least %d (e.g. `openssl rand -hex 16`), or none to close the admin API",
			len(token), MinAdminTokenLen)
	}
	return nil
}

// Load reads the process environment.
func Load() (Config, error) {
	return parse(env.Options{})
}

// FromMap reads settings from m instead of the environment (for tests).
func FromMap(m map[string]string) (Config, error) {
	return parse(env.Options{Environment: m})
}

func parse(opts env.Options) (Config, error) {
	var c Config
	opts.OnSet = func(key string, _ any, isDefault bool) {
		if key == "RATE_LIMIT_IP_RPS" && !isDefault {
			c.RateLimitIPRPSSet = true
		}
	}
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return Config{}, readable(err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return Config{}, fmt.Errorf("config: LOG_FORMAT %q: want text or json", c.LogFormat)
	}
	if c.RateLimitUserRPS < 0 || c.RateLimitIPRPS < 0 {
		return Config{}, fmt.Errorf("config: RATE_LIMIT_USER_RPS and RATE_LIMIT_IP_RPS must be 0 (off) or positive")
	}
	if err := CheckAdminToken(c.AdminToken); err != nil {
		return Config{}, err
	}
	if c.SoldOutTTL <= 0 {
		return Config{}, fmt.Errorf("config: SOLD_OUT_TTL must be positive (a duration: 1s)")
	}
	if c.JWTCacheSize < 0 {
		return Config{}, fmt.Errorf("config: JWT_CACHE_SIZE must be 0 (off) or positive")
	}
	for _, p := range c.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			return Config{}, fmt.Errorf("config: TRUSTED_PROXIES: %q is neither an IP nor a CIDR", p)
		}
	}
	switch c.EmbeddedMode {
	case "auto", "servers", "memory":
	default:
		return Config{}, fmt.Errorf("config: EMBEDDED_MODE %q: want auto, servers or memory", c.EmbeddedMode)
	}
	if c.RedisCluster && c.RedisURL == "" {
		return Config{}, fmt.Errorf("config: REDIS_CLUSTER needs REDIS_URL (the embedded mode has no cluster)")
	}
	if c.RedisSentinelMaster != "" && c.RedisURL == "" {
		return Config{}, fmt.Errorf("config: REDIS_SENTINEL_MASTER needs REDIS_URL listing the sentinels")
	}
	if c.RedisAckReplicas < 0 {
		return Config{}, fmt.Errorf("config: REDIS_ACK_REPLICAS must be 0 or more")
	}
	// WAIT with 0 ms blocks for ever; and a wait as long as the Redis
	// client's read timeout (5 s, go-redis v9's default: ReadTimeout in its
	// options.go) gets the pipeline sent again.
	if c.RedisAckTimeout < 10*time.Millisecond || c.RedisAckTimeout > 2*time.Second {
		return Config{}, fmt.Errorf("config: REDIS_ACK_TIMEOUT %v: want 10ms to 2s", c.RedisAckTimeout)
	}
	// A request must outlive the WAIT it may hold for the replicas, or
	// every acknowledged change would time out instead of succeeding.
	if c.RequestTimeout <= c.RedisAckTimeout || c.RequestTimeout > time.Minute {
		return Config{}, fmt.Errorf("config: REQUEST_TIMEOUT %v: want more than REDIS_ACK_TIMEOUT (%v) and at most 1m", c.RequestTimeout, c.RedisAckTimeout)
	}
	if c.RedisAckReplicas > 0 && c.RedisCluster {
		return Config{}, fmt.Errorf("config: REDIS_ACK_REPLICAS is for one primary with replicas (REDIS_SENTINEL_MASTER), not REDIS_CLUSTER")
	}
	if c.RedisSentinelMaster != "" && c.RedisCluster {
		return Config{}, fmt.Errorf("config: REDIS_SENTINEL_MASTER and REDIS_CLUSTER exclude each other")
	}
	if c.PresenceTTL <= 0 {
		return Config{}, fmt.Errorf("config: PRESENCE_TTL %v: want a positive duration", c.PresenceTTL)
	}
	if c.WorkerConcurrency <= 0 {
		return Config{}, fmt.Errorf("config: WORKER_CONCURRENCY must be positive")
	}
	if c.WebhookTimeout <= 0 || c.WebhookConcurrency <= 0 || c.WebhookEndpointConcurrency <= 0 ||
		c.WebhookRotationWindow <= 0 || c.WebhookDispatchInterval <= 0 {
		return Config{}, fmt.Errorf("config: WEBHOOK_TIMEOUT, WEBHOOK_CONCURRENCY, WEBHOOK_ENDPOINT_CONCURRENCY, " +
			"WEBHOOK_ROTATION_WINDOW and WEBHOOK_DISPATCH_INTERVAL must be positive")
	}
	var span time.Duration
	for _, d := range c.WebhookRetrySchedule {
		if d < 0 {
			return Config{}, fmt.Errorf("config: WEBHOOK_RETRY_SCHEDULE: %v: want waits of 0 or more", d)
		}
		span += d
	}
	if c.WebhookRepairWindow <= 0 || c.WebhookRepairWindow >= c.WebhookRetention {
		return Config{}, fmt.Errorf("config: WEBHOOK_REPAIR_WINDOW %v: want positive and shorter than WEBHOOK_RETENTION",
			c.WebhookRepairWindow)
	}
	// A delivery's attempts are all kept until its schedule (+10% jitter)
	// has run: whether its endpoint is disabled depends on them.
	if c.WebhookRetention <= span+span/10 {
		return Config{}, fmt.Errorf("config: WEBHOOK_RETENTION %v: want longer than the retry schedule's %v (+10%%)",
			c.WebhookRetention, span)
	}
	for _, k := range []struct{ name, value string }{{"WEBHOOK_SECRET_KEY", c.WebhookSecretKey},
		{"WEBHOOK_SECRET_KEY_OLD", c.WebhookSecretKeyOld}} {
		if err := checkKey32(k.value); err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", k.name, err)
		}
	}
	if c.WebhookSecretKeyOld != "" && c.WebhookSecretKey == "" {
		return Config{}, fmt.Errorf("config: WEBHOOK_SECRET_KEY_OLD is a rotation's old key: set WEBHOOK_SECRET_KEY too")
	}
	if c.ShutdownTimeout <= 0 {
		return Config{}, fmt.Errorf("config: SHUTDOWN_TIMEOUT %v: want a positive duration", c.ShutdownTimeout)
	}
	return c, nil
}

// The payment providers (PAYMENT_PROVIDER).
const (
	PaymentStripe    = "stripe"
	PaymentSimulated = "simulated"
)

// Embedded reports whether neither REDIS_URL nor MYSQL_DSN is set: the
// embedded mode, the api's own Redis and MySQL (EmbeddedMode).
func (c Config) Embedded() bool { return c.RedisURL == "" && c.MySQLDSN == "" }

// Payments is the provider in use: PAYMENT_PROVIDER, or simulated in
// embedded mode.
func (c Config) Payments() string {
	if c.PaymentProvider == "" && c.Embedded() {
		return PaymentSimulated
	}
	return c.PaymentProvider
}

// CheckPayments refuses a provider that cannot take money: none chosen
// against real servers (the simulated one would mark orders paid with no
// money taken), Stripe without its keys, a currency not of three letters.
// The api and the worker check it as they start; the commands that take
// no payments (migrate, token, upgrade-redis) do not need one.
func (c Config) CheckPayments() error {
	switch c.Payments() {
	case PaymentSimulated:
	case PaymentStripe:
		if c.StripeSecretKey == "" || c.StripeWebhookSecret == "" {
			return fmt.Errorf("config: PAYMENT_PROVIDER=stripe needs STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET")
		}
	case "":
		return fmt.Errorf("config: PAYMENT_PROVIDER is not set: stripe (with STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET) " +
			"takes real payments; simulated marks orders paid with no money taken — choose it only for demos and load tests")
	default:
		return fmt.Errorf("config: PAYMENT_PROVIDER %q: want stripe or simulated", c.PaymentProvider)
	}
	if len(c.PaymentCurrency) != 3 {
		return fmt.Errorf("config: PAYMENT_CURRENCY %q: want an ISO 4217 code (cny, usd, …)", c.PaymentCurrency)
	}
	return nil
}

// readable names the environment variable in a parse error; the library names
// the Go struct field, which means nothing to an operator.
func readable(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("config: %w", err)
	}
	t := reflect.TypeFor[Config]()
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				msgs = append(msgs, fmt.Sprintf("%s: %v", f.Tag.Get("env"), pe.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("config: %s", strings.Join(msgs, "; "))
}

// checkKey32 says what is wrong with s as a key of 32 bytes in base64 ("":
// none, nothing wrong). mysqlstore.ParseSecretKey decodes it.
func checkKey32(s string) error {
	if s == "" {
		return nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != 32 {
				return fmt.Errorf("%d bytes; want 32 in base64 (openssl rand -base64 32)", len(k))
			}
			return nil
		}
	}
	return fmt.Errorf("not base64; want 32 bytes in base64 (openssl rand -base64 32)")
}
