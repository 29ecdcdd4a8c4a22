// Package httpapi is the HTTP adapter: gin routers, middleware and handlers
// for the client API, the admin API and the operational endpoints.
package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/console"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/webhook"
)

func init() {
	// gin's debug mode prints every route at start-up and warns on stdout.
	gin.SetMode(gin.ReleaseMode)
}

// Deps are what the API's handlers need.
type Deps struct {
	Logger *slog.Logger
	// Checks are the readiness checks served on /readyz, by name.
	Checks map[string]health.Check
	// Admin serves /admin/v1, and the admin console at /admin/; nil leaves
	// both out.
	Admin *admin.Service
	// AdminToken is the bearer token /admin/v1 requires; empty closes it.
	AdminToken string
	// AdminLimit bounds failed attempts at AdminToken per client network;
	// the zero value gives its defaults (10, then one every 6 s).
	AdminLimit AdminLimit
	// AdminGate, if set, holds /admin/v1 at UNAVAILABLE until it opens (the
	// schema is being migrated).
	AdminGate *Gate
	// Shop serves the client API, /v1; nil leaves it out.
	Shop *Shop
	// TrustedProxies may set the client IP with X-Forwarded-For; none when
	// empty (config.Config.TrustedProxies, validated there).
	TrustedProxies []string
	// Metrics serves /metrics (Prometheus); nil leaves it out.
	Metrics http.Handler
	// Registerer, if set, takes the request metrics
	// (flashsale_http_requests_total and _request_duration_seconds).
	Registerer prometheus.Registerer
	// Tracing, if set, runs first on every request: its span
	// (internal/tracing, otelgin).
	Tracing gin.HandlerFunc
	// Locks answers GET /admin/v1/locks/{name}: who holds a lock.
	Locks lock.Inspector
	// Webhooks serves /admin/v1/webhook-endpoints (docs/webhooks.md); nil
	// leaves them out.
	Webhooks *webhook.Service
	// RequestTimeout bounds every /v1 and /admin/v1 request (REQUEST_TIMEOUT);
	// past it the answer is 503 UNAVAILABLE with Retry-After. Default
	// DefaultRequestTimeout, 3 s.
	RequestTimeout time.Duration
}

// NewRouter returns the API's handler.
func NewRouter(d Deps) *gin.Engine {
	r := newEngine(d.Logger)
	if d.Tracing != nil {
		r.Use(d.Tracing)
	}
	if d.Registerer != nil {
		r.Use(newRequestMetrics(d.Registerer).handler)
	}
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		d.Logger.Error("TRUSTED_PROXIES refused; trusting no proxy", "err", err)
		_ = r.SetTrustedProxies(nil)
	}
	health.Register(r, d.Checks)
	serveOpenAPI(r)
	if d.Metrics != nil {
		r.GET("/metrics", gin.WrapH(d.Metrics))
	}
	if d.Admin != nil {
		var payments *payment.Service
		if d.Shop != nil {
			payments = d.Shop.Payments
		}
		var p *presence.Tracker
		if d.Shop != nil {
			p = d.Shop.Presence
		}
		g := registerAdmin(r, deadline(d.RequestTimeout), d.Admin, d.AdminToken, d.AdminLimit, d.AdminGate, p, d.Locks, payments)
		if d.Webhooks != nil {
			registerAdminWebhooks(g, d.Webhooks)
		}
		console.Register(r) // the admin console's static pages, at /admin/
	}
	if d.Shop != nil {
		registerShop(r, deadline(d.RequestTimeout), d.Shop)
		if d.Shop.Payments != nil {
			registerWebhooks(r, deadline(d.RequestTimeout), d.Shop.Payments)
		}
	}
	return r
}

// NewOpsRouter returns the handler of a process that only serves operational
// endpoints (the worker).
func NewOpsRouter(log *slog.Logger, checks map[string]health.Check) *gin.Engine {
	r := newEngine(log)
	health.Register(r, checks)
	return r
}

func newEngine(log *slog.Logger) *gin.Engine {
	r := gin.New()
	// gin trusts every proxy's X-Forwarded-For unless told otherwise; NewRouter
	// sets the configured ones, everything else trusts none.
	_ = r.SetTrustedProxies(nil)
	r.Use(logging.Requests(log))
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		httperr.Write(c, fmt.Errorf("panic: %v", err))
	}))
	r.NoRoute(func(c *gin.Context) {
		httperr.Write(c, httperr.New(httperr.NotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path))
	})
	// A known path with a method it does not have is 405 with Allow (RFC
	// 9110 15.5.6), not 404. gin sets Allow before the NoMethod handlers
	// run: the methods of the other routes that match the path, joined by
	// ", " in the order each method's first route was registered (not
	// sorted), and neither HEAD nor OPTIONS, which gin never adds for a
	// GET: HEAD /healthz is 405 "Allow: GET".
	r.HandleMethodNotAllowed = true
	r.NoMethod(func(c *gin.Context) {
		httperr.Write(c, httperr.New(httperr.MethodNotAllowed, "%s is not allowed on %s; allowed: %s",
			c.Request.Method, c.Request.URL.Path, c.Writer.Header().Get("Allow")))
	})
	return r
}
