package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/health"
)

// readyz answers GET /readyz of a router with checks.
func readyz(t *testing.T, checks map[string]health.Check) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	health.Register(r, checks)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%d %q: %v", w.Code, w.Body, err)
	}
	return w, body
}

// Not ready is 503 UNAVAILABLE with Retry-After, as every 503 of the API,
// naming what failed (a NotReady's text; anything else as "unavailable").
func TestReadyz_aCheckFails_is503WithRetryAfter(t *testing.T) {
	w, body := readyz(t, map[string]health.Check{
		"redis":      func(context.Context) error { return nil },
		"mysql":      func(context.Context) error { return errors.New("dial tcp 10.0.0.7:3306: refused") },
		"migrations": func(context.Context) error { return health.NotReady("the schema is not migrated yet") },
	})
	checks, _ := body["checks"].(map[string]any)
	code, _ := body["error"].(map[string]any)["code"].(string)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || code != "UNAVAILABLE" ||
		checks["redis"] != "ok" || checks["mysql"] != "unavailable" || checks["migrations"] != "the schema is not migrated yet" {
		t.Fatalf("%d Retry-After %q: %v", w.Code, w.Header().Get("Retry-After"), body)
	}
}

// Ready is 200 with no Retry-After.
func TestReadyz_allChecksPass_is200(t *testing.T) {
	w, body := readyz(t, map[string]health.Check{"redis": func(context.Context) error { return nil }})
	if w.Code != 200 || w.Header().Get("Retry-After") != "" || body["status"] != "ready" {
		t.Fatalf("%d Retry-After %q: %v", w.Code, w.Header().Get("Retry-After"), body)
	}
}
