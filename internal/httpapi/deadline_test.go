package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
)

// A request past its deadline answers 503 UNAVAILABLE with Retry-After,
// whatever the handler's error was (the context's own, a wrapped one, an
// unknown one), saying what it waited on, REQUEST_TIMEOUT, and how to try
// again — with the same Idempotency-Key only on a route that takes one; a
// refusal made in time stands; a client that went away is 499; and a
// request without trouble is untouched.
func TestDeadline_expiry_is503NamingWhatItWaitedOn_clientGoneStays499(t *testing.T) {
	const d = 100 * time.Millisecond
	r := gin.New()
	r.Use(deadline(d))
	after := func(err func(context.Context) error) gin.HandlerFunc {
		return func(c *gin.Context) {
			<-c.Request.Context().Done()
			fail(c, err(c.Request.Context()))
		}
	}
	r.GET("/ctx", after(func(ctx context.Context) error { return ctx.Err() }))
	r.GET("/redis", after(func(ctx context.Context) error {
		return fmt.Errorf("%w: accept: %w", order.ErrUnavailable, ctx.Err())
	}))
	r.GET("/mysql", after(func(ctx context.Context) error {
		return fmt.Errorf("%w: get activity 1: %w", mysqlstore.ErrUnavailable, ctx.Err())
	}))
	r.GET("/provider", after(func(ctx context.Context) error {
		return fmt.Errorf("%w: create: %w", payment.ErrProvider, ctx.Err())
	}))
	r.GET("/lock", after(func(ctx context.Context) error {
		return fmt.Errorf("%w: %w", order.ErrLockWait, ctx.Err())
	}))
	r.GET("/redis-under-a-lock", after(func(ctx context.Context) error {
		return fmt.Errorf("%w: lock: %w: %w", order.ErrUnavailable, order.ErrLockWait, lock.ErrUnavailable)
	}))
	r.GET("/unknown", after(func(context.Context) error { return errors.New("read tcp: i/o timeout") }))
	r.GET("/refused", after(func(context.Context) error { return activity.ErrSoldOut }))
	r.POST("/keyed", func(c *gin.Context) {
		<-c.Request.Context().Done()
		failKeyed(c, fmt.Errorf("%w: accept: %w", order.ErrUnavailable, c.Request.Context().Err()))
	})
	r.GET("/quick", func(c *gin.Context) {
		if dl, ok := c.Request.Context().Deadline(); !ok || time.Until(dl) > d {
			c.Status(500)
			return
		}
		c.Status(200)
	})

	const (
		within   = " within REQUEST_TIMEOUT (100ms); "
		lockWait = "the lock this request waits for (another request of the same user or order holds it) was not free"
	)
	for _, tc := range []struct {
		method, path string
		status       int
		message      string // of a 503
	}{
		{"GET", "/ctx", 503, "not done" + within + tryAgain},
		{"GET", "/redis", 503, "Redis did not answer" + within + tryAgain},
		{"GET", "/mysql", 503, "MySQL did not answer" + within + tryAgain},
		{"GET", "/provider", 503, "the payment provider did not answer" + within + tryAgain},
		{"GET", "/lock", 503, lockWait + within + tryAgain},
		{"GET", "/redis-under-a-lock", 503, "Redis did not answer" + within + tryAgain},
		{"GET", "/unknown", 503, "not done" + within + tryAgain},
		{"POST", "/keyed", 503, "Redis did not answer" + within +
			"try again with the same Idempotency-Key: an order this attempt made is returned, not made twice"},
		{"GET", "/refused", 409, ""},
		{"GET", "/quick", 200, ""},
	} {
		w := httptest.NewRecorder()
		start := time.Now()
		r.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		took := time.Since(start)
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.path, w.Code, w.Body, tc.status)
			continue
		}
		if took > d+2*time.Second {
			t.Errorf("%s: answered after %v", tc.path, took)
		}
		if tc.status != 503 {
			continue
		}
		var body httperr.Body
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != httperr.Unavailable ||
			body.Error.Message != tc.message {
			t.Errorf("%s: body %s, want UNAVAILABLE %q", tc.path, w.Body, tc.message)
		}
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", tc.path)
		}
	}

	gone, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest(http.MethodGet, "/ctx", nil).WithContext(gone)
	time.AfterFunc(10*time.Millisecond, cancel)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != 499 {
		t.Errorf("a client that went away: %d, want 499", w.Code)
	}
}

// A dependency that fails before the deadline is named too, with the
// same advice: the key only where the route takes one. The code stays
// UNAVAILABLE whichever it is.
func TestFail_aDependencysFailure_namesIt_andTheKeyOnlyWhereTheRouteTakesOne(t *testing.T) {
	for _, tc := range []struct {
		err     error
		keyed   bool
		message string
	}{
		{fmt.Errorf("%w: accept: dial tcp: connection refused", order.ErrUnavailable), false, "Redis is unavailable; try again"},
		{fmt.Errorf("%w: accept: dial tcp: connection refused", order.ErrUnavailable), true,
			"Redis is unavailable; try again with the same Idempotency-Key: an order this attempt made is returned, not made twice"},
		{fmt.Errorf("%w: get activity 1: bad connection", mysqlstore.ErrUnavailable), false, "MySQL is unavailable; try again"},
		// A payment record MySQL did not read is the payment service's
		// error too: named MySQL's all the same.
		{fmt.Errorf("%w (%w): payments: bad connection", payment.ErrUnavailable, mysqlstore.ErrUnavailable), false,
			"MySQL is unavailable; try again"},
		{fmt.Errorf("%w: payment: i/o timeout", payment.ErrUnavailable), false, "Redis is unavailable; try again"},
		{fmt.Errorf("%w: create: 502", payment.ErrProvider), false, "the payment provider is unavailable; try again"},
		{fmt.Errorf("%w: open: %w", order.ErrNotReplicated, errors.New("1 of 2 replicas")), true,
			"not yet saved on enough Redis replicas; " + tryAgainWithKey},
	} {
		r := gin.New()
		r.GET("/", func(c *gin.Context) {
			if tc.keyed {
				failKeyed(c, tc.err)
			} else {
				fail(c, tc.err)
			}
		})
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		var body httperr.Body
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 503 ||
			body.Error.Code != httperr.Unavailable || body.Error.Message != tc.message {
			t.Errorf("%v (keyed %v): %d %s, want 503 UNAVAILABLE %q", tc.err, tc.keyed, w.Code, w.Body, tc.message)
		}
	}
}
