package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/presence"
)

func TestRouter_panic_answersBareInternalError(t *testing.T) {
	var logs strings.Builder
	r := httpapi.NewRouter(httpapi.Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r.GET("/boom", func(*gin.Context) { panic("secret detail") })

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/boom", nil))

	var body httperr.Body
	raw, _ := io.ReadAll(w.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	if w.Code != 500 || body.Error.Code != httperr.Internal || body.Error.Message != "internal error" {
		t.Fatalf("got %d %+v", w.Code, body)
	}
	if strings.Contains(string(raw), "secret") {
		t.Fatal("panic detail leaked to the client")
	}
}

func TestStatus_everyCodeHasItsStatus(t *testing.T) {
	want := map[httperr.Code]int{
		httperr.InvalidArgument: 400, httperr.Unauthenticated: 401, httperr.Forbidden: 403,
		httperr.NotFound: 404, httperr.Conflict: 409, httperr.SoldOut: 409, httperr.LimitExceeded: 409,
		httperr.NotStarted: 409, httperr.Ended: 409, httperr.RateLimited: 429,
		httperr.Unavailable: 503, httperr.Internal: 500, httperr.Code("NO_SUCH_CODE"): 500,
		httperr.GroupFull: 409, httperr.GroupClosed: 409, httperr.AlreadyMember: 409,
		httperr.MethodNotAllowed: 405, httperr.UnsupportedMediaType: 415,
	}
	for code, status := range want {
		if got := httperr.Status(code); got != status {
			t.Errorf("%s: %d, want %d", code, got, status)
		}
	}
}

// A client that went away mid-request is not an internal error: 499, and
// nothing logged above debug. The same error with the client still there is.
func TestWrite_clientGone_is499AndNotLoggedAsAnError(t *testing.T) {
	var logs strings.Builder
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	r := httpapi.NewRouter(httpapi.Deps{Logger: slog.Default()})
	r.GET("/slow", func(c *gin.Context) { httperr.Write(c, fmt.Errorf("lock: %w", context.Canceled)) })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/slow", nil).WithContext(ctx))
	if w.Code != 499 || strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("client gone: %d, logs %q", w.Code, logs.String())
	}

	w = httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/slow", nil))
	if w.Code != 500 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("a cancellation not from the client: %d, logs %q", w.Code, logs.String())
	}
}

// A method a known path does not have is 405 METHOD_NOT_ALLOWED in the one
// error shape, with Allow listing the methods it has; a path nobody serves
// stays 404.
func TestRouter_wrongMethodOnAKnownPath_is405WithAllow(t *testing.T) {
	r := httpapi.NewRouter(httpapi.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Admin: &admin.Service{}, Shop: &httpapi.Shop{Presence: &presence.Tracker{}}})
	for _, tc := range []struct {
		method, path string
		allow        []string // nil: 404
	}{
		{"DELETE", "/v1/orders/1-0CF3YH0AB7J8Q2RS", []string{"GET"}},
		{"PUT", "/v1/activities/1", []string{"GET"}},
		{"HEAD", "/healthz", []string{"GET"}},
		{"POST", "/readyz", []string{"GET"}},
		{"DELETE", "/v1/activities/1/groups", []string{"GET", "POST"}},
		{"PUT", "/admin/v1/activities/1", []string{"GET", "PATCH"}},
		{"GET", "/v1/orders/1-0CF3YH0AB7J8Q2RS/pay", []string{"POST"}},
		{"GET", "/v1/nowhere", nil},
		{"DELETE", "/v1/nowhere", nil},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		var body httperr.Body
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		allow := strings.Split(w.Header().Get("Allow"), ", ")
		slices.Sort(allow)
		switch {
		case tc.allow == nil && (w.Code != 404 || body.Error.Code != httperr.NotFound || w.Header().Get("Allow") != ""):
			t.Errorf("%s %s: %d %q Allow %q, want 404 NOT_FOUND", tc.method, tc.path, w.Code, w.Body, w.Header().Get("Allow"))
		case tc.allow != nil && (w.Code != 405 || body.Error.Code != httperr.MethodNotAllowed || !slices.Equal(allow, tc.allow)):
			t.Errorf("%s %s: %d %q Allow %q, want 405 METHOD_NOT_ALLOWED with Allow %v", tc.method, tc.path, w.Code, w.Body,
				w.Header().Get("Allow"), tc.allow)
		}
	}
}
