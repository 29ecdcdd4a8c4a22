package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The lock inspection's errors get their codes from the one table
// (errors.go): nobody holding the lock is 404 NOT_FOUND, a name the lock
// library refuses is 400 INVALID_ARGUMENT, Redis down is 503 UNAVAILABLE.
func TestAdmin_lockHolder_errorsGetTheirCodesFromTheTable(t *testing.T) {
	srv := testenv.StartRedis(t)
	locks := lock.New(srv.Client(t))
	t.Cleanup(func() { _ = locks.Close() })
	ts := httptest.NewServer(httpapi.NewRouter(httpapi.Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Admin: admin.New(nil, nil, nil, nil, admin.Config{}),
		AdminToken: token, Locks: locks,
	}))
	t.Cleanup(ts.Close)
	e := &adminEnv{url: ts.URL, client: apitest.Client(t)}

	held, err := locks.Obtain(context.Background(), "worker:reconciler", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background()) //nolint:errcheck // the server is stopped by then
	if code, body := e.admin(t, http.MethodGet, "/admin/v1/locks/worker:reconciler", ""); code != 200 || body["fence"] != float64(held.Fence()) {
		t.Fatalf("a held lock: %d %v", code, body)
	}
	user, err := locks.Obtain(context.Background(), "42", 10*time.Second, lock.InTable("order-user:7"), lock.WithLabel("placing"))
	if err != nil {
		t.Fatal(err)
	}
	defer user.Release(context.Background()) //nolint:errcheck // the server is stopped by then
	if code, body := e.admin(t, http.MethodGet, "/admin/v1/locks/42?table=order-user:7", ""); code != 200 || body["label"] != "placing" {
		t.Fatalf("a held lock in a table: %d %v", code, body)
	}
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"nobody holds it", "/admin/v1/locks/order:1-0CF3YH0AB7J8Q2RS", 404, "NOT_FOUND"},
		{"nobody holds it in the table", "/admin/v1/locks/43?table=order-user:7", 404, "NOT_FOUND"},
		{"a lock of its own is not the table's", "/admin/v1/locks/42", 404, "NOT_FOUND"},
		{"not a lock name", "/admin/v1/locks/fs:%7Bact:1%7D", 400, "INVALID_ARGUMENT"},
		{"not a table name", "/admin/v1/locks/42?table=a%7Bb", 400, "INVALID_ARGUMENT"},
	} {
		if code, body := e.admin(t, http.MethodGet, tc.path, ""); code != tc.status || errCode(body) != tc.code {
			t.Errorf("%s: %d %v; want %d %s", tc.name, code, body, tc.status, tc.code)
		}
	}
	srv.Stop()
	if code, body := e.admin(t, http.MethodGet, "/admin/v1/locks/worker:reconciler", ""); code != 503 || errCode(body) != "UNAVAILABLE" {
		t.Fatalf("Redis down: %d %v; want 503 UNAVAILABLE", code, body)
	}
}
