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
	"github.com/flashsale/flashsale/internal/order"
)

// A request past its deadline answers 503 UNAVAILABLE with Retry-After,
// whatever the handler's error was (the context's own, a wrapped one, an
// unknown one); a refusal made in time stands; a client that went away is
// 499; and a request without trouble is untouched.
func TestDeadline_expiry_is503WithRetryAfter_clientGoneStays499(t *testing.T) {
	const d = 100 * time.Millisecond
	r := gin.New()
	r.Use(deadline(d))
	wait := func(c *gin.Context) { <-c.Request.Context().Done() }
	r.GET("/ctx", func(c *gin.Context) { wait(c); fail(c, c.Request.Context().Err()) })
	r.GET("/wrapped", func(c *gin.Context) {
		wait(c)
		fail(c, fmt.Errorf("%w: lock: %w", order.ErrUnavailable, c.Request.Context().Err()))
	})
	r.GET("/unknown", func(c *gin.Context) { wait(c); fail(c, errors.New("read tcp: i/o timeout")) })
	r.GET("/refused", func(c *gin.Context) { wait(c); fail(c, activity.ErrSoldOut) })
	r.GET("/quick", func(c *gin.Context) {
		if dl, ok := c.Request.Context().Deadline(); !ok || time.Until(dl) > d {
			c.Status(500)
			return
		}
		c.Status(200)
	})

	for path, want := range map[string]int{"/ctx": 503, "/wrapped": 503, "/unknown": 503, "/refused": 409, "/quick": 200} {
		w := httptest.NewRecorder()
		start := time.Now()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		took := time.Since(start)
		if w.Code != want {
			t.Errorf("%s: %d %s, want %d", path, w.Code, w.Body, want)
			continue
		}
		if took > d+2*time.Second {
			t.Errorf("%s: answered after %v", path, took)
		}
		if want != 503 {
			continue
		}
		var body httperr.Body
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code != httperr.Unavailable {
			t.Errorf("%s: body %s", path, w.Body)
		}
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", path)
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
