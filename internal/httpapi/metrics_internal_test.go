package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/internal/httperr"
)

// Requests are counted by route pattern (not the path: one series for
// every order number), method, status and the answer's error code —
// written by httperr.Write, by a canned answer, or none for a success —
// and a path no route matches is "unmatched", whatever it is.
func TestRequestMetrics_byRoutePatternStatusAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newRequestMetrics(reg)
	r := gin.New()
	r.Use(m.handler)
	soldOut := httperr.Can(httperr.New(httperr.SoldOut, "sold out"))
	r.POST("/v1/orders/:no/pay", func(c *gin.Context) { c.JSON(200, gin.H{"status": "paid"}) })
	r.POST("/v1/orders/:no/cancel", func(c *gin.Context) {
		httperr.Write(c, httperr.New(httperr.Conflict, "the order is paid"))
	})
	r.POST("/v1/activities/:id/orders", soldOut.Write)
	r.NoRoute(func(c *gin.Context) { httperr.Write(c, httperr.New(httperr.NotFound, "no route")) })
	for _, path := range []string{"/v1/orders/1-A/pay", "/v1/orders/1-B/pay", "/v1/orders/1-A/cancel", "/v1/activities/7/orders",
		"/v1/activities/8/orders", "/wp-login.php", "/.env"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
	}
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"/v1/orders/:no/pay", "POST", "200", ""}, 2},
		{[]string{"/v1/orders/:no/cancel", "POST", "409", "CONFLICT"}, 1},
		{[]string{"/v1/activities/:id/orders", "POST", "409", "SOLD_OUT"}, 2},
		{[]string{"unmatched", "POST", "404", "NOT_FOUND"}, 2},
	} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.labels...)); got != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.requests); n != 4 {
		t.Errorf("%d request series, want 4 (one per route, status and code)", n)
	}
	if n := testutil.CollectAndCount(m.duration); n != 4 {
		t.Errorf("%d duration series, want 4 (one per route and method)", n)
	}
}

// BenchmarkRequestMetrics: the order path's counting and timing of one
// request, its series remembered (go test -run '^$' -bench RequestMetrics
// -benchmem ./internal/httpapi/).
func BenchmarkRequestMetrics(b *testing.B) {
	m := newRequestMetrics(prometheus.NewRegistry())
	r := gin.New()
	r.Use(m.handler)
	r.POST("/v1/activities/:id/orders", func(c *gin.Context) { c.Status(http.StatusAccepted) })
	req := httptest.NewRequest(http.MethodPost, "/v1/activities/7/orders", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		r.ServeHTTP(w, req)
	}
}
