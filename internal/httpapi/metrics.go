package httpapi

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/memo"
)

// requestMetrics counts every request by route (gin's pattern, e.g.
// /v1/activities/:id/orders; "unmatched" for none, so a scan of made-up
// paths adds no series), method, status and error code (httperr's JSON
// code: SOLD_OUT, LIMIT_EXCEEDED, UNAVAILABLE…; empty for a success), and
// times it by route and method. The dashboard's orders/s, refusals by code
// and p99, and the alerts' error rates, read these
// (deploy/prometheus, deploy/grafana).
type requestMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// counters and timers remember each label set's series (memo): found
	// by WithLabelValues on every request before (hashing the labels, a
	// map under a lock, the status's text), 0.7 µs of a fresh shopper's
	// order in the api's profile (issue 43).
	counters *memo.Cache[requestLabels, prometheus.Counter]
	timers   *memo.Cache[routeMethod, prometheus.Observer]
}

type requestLabels struct {
	route, method, code string
	status              int
}

type routeMethod struct{ route, method string }

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method, status and error code (empty for a success).",
		}, []string{"route", "method", "status", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_http_request_duration_seconds",
			Help: "Time from a request's arrival to its answer, by route pattern and method.",
			// The order path answers in a millisecond or two; REQUEST_TIMEOUT
			// (3 s by default) bounds the rest.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
	}
	m.counters = memo.New(512, func(l requestLabels) prometheus.Counter {
		return m.requests.WithLabelValues(l.route, l.method, strconv.Itoa(l.status), l.code)
	})
	m.timers = memo.New(256, func(r routeMethod) prometheus.Observer {
		return m.duration.WithLabelValues(r.route, r.method)
	})
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *requestMetrics) handler(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m.counters.Get(requestLabels{route: route, method: c.Request.Method, status: c.Writer.Status(), code: httperr.CodeOf(c)}).Inc()
	m.timers.Get(routeMethod{route, c.Request.Method}).Observe(time.Since(start).Seconds())
}
