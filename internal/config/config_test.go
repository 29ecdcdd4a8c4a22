package config_test

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/config"
)

// adminToken is an ADMIN_TOKEN of the shortest length accepted.
const adminToken = "0123456789abcdef0123456789abcdef"

func TestFromMap_empty_givesDefaults(t *testing.T) {
	c, err := config.FromMap(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.WorkerHTTPAddr != ":8081" || c.LogLevel != slog.LevelInfo || !c.MigrateOnStart || c.AdminToken != "" ||
		c.LogFormat != "text" || c.ShutdownTimeout != 15*time.Second || c.RedisURL != "" || c.MySQLDSN != "" ||
		c.RequestTimeout != 3*time.Second || c.EmbeddedMode != "auto" {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestFromMap_readsEveryVariable(t *testing.T) {
	c, err := config.FromMap(map[string]string{
		"HTTP_ADDR": "127.0.0.1:9000", "WORKER_HTTP_ADDR": ":9001",
		"REDIS_URL": "redis://r:6379/1", "MYSQL_DSN": "u:p@tcp(m:3306)/fs",
		"LOG_LEVEL": "debug", "LOG_FORMAT": "json", "SHUTDOWN_TIMEOUT": "3s",
		"ADMIN_TOKEN": adminToken, "MIGRATE_ON_START": "false", "TRUSTED_PROXIES": "10.0.0.0/8,192.168.1.7",
		"REDIS_CLUSTER": "true", "JWT_CACHE_SIZE": "1000", "REDIS_ACK_TIMEOUT": "250ms", "REQUEST_TIMEOUT": "1500ms",
		"PAYMENT_PROVIDER": "stripe", "PAYMENT_CURRENCY": "usd", "STRIPE_SECRET_KEY": "sk_test_1", "STRIPE_WEBHOOK_SECRET": "whsec_1",
		"STRIPE_API_URL": "http://127.0.0.1:12111", "STRIPE_METADATA_TAG": "shop-eu", "SIMULATED_WEBHOOK_SECRET": "sim",
		"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_TIMEOUT": "2s", "WEBHOOK_CONCURRENCY": "4", "WEBHOOK_ENDPOINT_CONCURRENCY": "2",
		"WEBHOOK_RETRY_SCHEDULE": "10ms,1s", "WEBHOOK_ROTATION_WINDOW": "1h", "WEBHOOK_DISPATCH_INTERVAL": "50ms",
		"WEBHOOK_RETENTION": "48h", "WEBHOOK_REPAIR_WINDOW": "90s", "WEBHOOK_SECRET_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"WEBHOOK_SECRET_KEY_OLD": "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",
		"EMBEDDED_MODE":          "memory",
		"SOLD_OUT_TTL":           "1m",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{HTTPAddr: "127.0.0.1:9000", WorkerHTTPAddr: ":9001", RedisURL: "redis://r:6379/1", RedisCluster: true,
		MySQLDSN: "u:p@tcp(m:3306)/fs", LogLevel: slog.LevelDebug, LogFormat: "json", ShutdownTimeout: 3 * time.Second,
		AdminToken: adminToken, MigrateOnStart: false, RateLimitUserRPS: 10, RateLimitIPRPS: 100, OrderUserLock: true,
		WorkerConcurrency: 64, TrustedProxies: []string{"10.0.0.0/8", "192.168.1.7"}, JWTCacheSize: 1000,
		RedisAckTimeout: 250 * time.Millisecond, RequestTimeout: 1500 * time.Millisecond, PresenceTTL: 300 * time.Second,
		SoldOutTTL: time.Minute, PaymentProvider: "stripe", PaymentCurrency: "usd", StripeSecretKey: "sk_test_1", StripeWebhookSecret: "whsec_1",
		StripeAPIURL: "http://127.0.0.1:12111", StripeMetadataTag: "shop-eu", SimulatedWebhookSecret: "sim",
		WebhookAllowPrivate: true, WebhookTimeout: 2 * time.Second, WebhookConcurrency: 4, WebhookEndpointConcurrency: 2,
		WebhookRetrySchedule: []time.Duration{10 * time.Millisecond, time.Second}, WebhookRotationWindow: time.Hour,
		WebhookDispatchInterval: 50 * time.Millisecond, WebhookRetention: 48 * time.Hour,
		WebhookRepairWindow: 90 * time.Second, WebhookSecretKey: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", WebhookSecretKeyOld: "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=",
		EmbeddedMode: "memory"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestFromMap_badValues_nameTheVariable(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"LOG_LEVEL":              {"LOG_LEVEL": "loud"},
		"LOG_FORMAT":             {"LOG_FORMAT": "xml"},
		"EMBEDDED_MODE":          {"EMBEDDED_MODE": "disk"},
		"SHUTDOWN_TIMEOUT":       {"SHUTDOWN_TIMEOUT": "soon"},
		"TRUSTED_PROXIES":        {"TRUSTED_PROXIES": "10.0.0.0/8,nginx"},
		"REDIS_CLUSTER":          {"REDIS_CLUSTER": "true"}, // without REDIS_URL
		"JWT_CACHE_SIZE":         {"JWT_CACHE_SIZE": "-1"},
		"REDIS_SENTINEL_MASTER":  {"REDIS_SENTINEL_MASTER": "m"}, // without REDIS_URL
		"REDIS_ACK_REPLICAS":     {"REDIS_ACK_REPLICAS": "-1"},
		"REDIS_ACK_TIMEOUT":      {"REDIS_ACK_TIMEOUT": "0s"},
		"REDIS_ACK_TIMEOUT ":     {"REDIS_ACK_TIMEOUT": "5s"},  // as long as the read timeout
		"REQUEST_TIMEOUT":        {"REQUEST_TIMEOUT": "500ms"}, // no longer than the ack timeout
		"REQUEST_TIMEOUT ":       {"REQUEST_TIMEOUT": "2m"},
		"REQUEST_TIMEOUT:":       {"REQUEST_TIMEOUT": "soon"},
		"WEBHOOK_TIMEOUT":        {"WEBHOOK_TIMEOUT": "0s"},
		"WEBHOOK_RETRY_SCHEDULE": {"WEBHOOK_RETRY_SCHEDULE": "5s,-1s"},
		"WEBHOOK_CONCURRENCY":    {"WEBHOOK_CONCURRENCY": "0"},
		"WEBHOOK_RETENTION":      {"WEBHOOK_RETENTION": "24h"}, // shorter than the default schedule's 27 h 35 min
		"WEBHOOK_SECRET_KEY":     {"WEBHOOK_SECRET_KEY": "c2hvcnQ="},
		"WEBHOOK_REPAIR_WINDOW":  {"WEBHOOK_REPAIR_WINDOW": "0s"},
		"WEBHOOK_SECRET_KEY_OLD": {"WEBHOOK_SECRET_KEY_OLD": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
	} {
		_, err := config.FromMap(m)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming it", name, err)
		}
	}
	if _, err := config.FromMap(map[string]string{"SHUTDOWN_TIMEOUT": "-1s"}); err == nil {
		t.Error("negative SHUTDOWN_TIMEOUT accepted")
	}
	for _, m := range []map[string]string{
		{"REDIS_URL": "redis://a", "REDIS_CLUSTER": "true", "REDIS_SENTINEL_MASTER": "m"},
		{"REDIS_URL": "redis://a", "REDIS_CLUSTER": "true", "REDIS_ACK_REPLICAS": "1"},
	} {
		if _, err := config.FromMap(m); err == nil {
			t.Errorf("%v accepted: Sentinel mode and acknowledged writes are for one primary, not a cluster", m)
		}
	}
}

// An ADMIN_TOKEN shorter than 32 bytes stops the start with a message
// that names it, its length and the minimum; none closes the admin API and
// is accepted, as are 32 bytes and more.
func TestFromMap_shortAdminToken_isRefusedWithTheMinimum(t *testing.T) {
	for _, tok := range []string{"t", "s3cret-admin-token", adminToken[:31]} {
		_, err := config.FromMap(map[string]string{"ADMIN_TOKEN": tok})
		want := fmt.Sprintf("config: ADMIN_TOKEN is %d bytes: want at least 32", len(tok))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ADMIN_TOKEN of %d bytes: %v; want %q", len(tok), err, want)
		}
	}
	for _, tok := range []string{"", adminToken, adminToken + adminToken} {
		if c, err := config.FromMap(map[string]string{"ADMIN_TOKEN": tok}); err != nil || c.AdminToken != tok {
			t.Errorf("ADMIN_TOKEN of %d bytes: %q, %v; want it accepted", len(tok), c.AdminToken, err)
		}
	}
}

// Embedded mode needs to tell a RATE_LIMIT_IP_RPS given from the default.
func TestFromMap_rateLimitIPRPSSet_onlyWhenGiven(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		rps  int
		set  bool
		name string
	}{
		{map[string]string{}, 100, false, "unset"},
		{map[string]string{"RATE_LIMIT_IP_RPS": ""}, 100, false, "empty"},
		{map[string]string{"RATE_LIMIT_IP_RPS": "100"}, 100, true, "the default, given"},
		{map[string]string{"RATE_LIMIT_IP_RPS": "0"}, 0, true, "off"},
		{map[string]string{"RATE_LIMIT_IP_RPS": "7", "RATE_LIMIT_USER_RPS": "3"}, 7, true, "given"},
	} {
		c, err := config.FromMap(tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.RateLimitIPRPS != tc.rps || c.RateLimitIPRPSSet != tc.set {
			t.Errorf("%s: RateLimitIPRPS %d, set %v; want %d, %v", tc.name, c.RateLimitIPRPS, c.RateLimitIPRPSSet, tc.rps, tc.set)
		}
	}
}

func TestLoad_rateLimitIPRPSSet_fromTheEnvironment(t *testing.T) {
	t.Setenv("RATE_LIMIT_IP_RPS", "5")
	c, err := config.Load()
	if err != nil || c.RateLimitIPRPS != 5 || !c.RateLimitIPRPSSet {
		t.Fatalf("Load with RATE_LIMIT_IP_RPS=5: %d, set %v, err %v", c.RateLimitIPRPS, c.RateLimitIPRPSSet, err)
	}
}

// The payment provider must be chosen against real servers: none is a
// start-up error naming both choices; embedded mode (no REDIS_URL or
// MYSQL_DSN) is simulated unless told; stripe needs its keys; an unknown
// provider or currency is refused.
func TestConfig_paymentProvider_chosenAgainstRealServers(t *testing.T) {
	real := map[string]string{"REDIS_URL": "redis://127.0.0.1:6379/0", "MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/db"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range real {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // "" accepted, else a part of the error
	}{
		{"real servers, none chosen", with(), "PAYMENT_PROVIDER is not set"},
		{"embedded, none chosen", map[string]string{}, ""},
		{"simulated, chosen", with("PAYMENT_PROVIDER", "simulated"), ""},
		{"stripe without its keys", with("PAYMENT_PROVIDER", "stripe"), "STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET"},
		{"stripe with its keys", with("PAYMENT_PROVIDER", "stripe", "STRIPE_SECRET_KEY", "sk_test_x", "STRIPE_WEBHOOK_SECRET", "whsec_x"), ""},
		{"an unknown provider", with("PAYMENT_PROVIDER", "paypal"), `PAYMENT_PROVIDER "paypal"`},
		{"a bad currency", with("PAYMENT_PROVIDER", "simulated", "PAYMENT_CURRENCY", "yuan"), "PAYMENT_CURRENCY"},
	} {
		cfg, err := config.FromMap(c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = cfg.CheckPayments()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if cfg, _ := config.FromMap(map[string]string{}); cfg.Payments() != config.PaymentSimulated {
		t.Errorf("embedded mode's provider: %q, want simulated", cfg.Payments())
	}
}
