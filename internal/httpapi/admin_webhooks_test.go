package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// queued records the deliveries the admin API queues.
type queued struct {
	mu sync.Mutex
	ds []webhook.Delivery
}

func (q *queued) Deliver(_ context.Context, ds []webhook.Delivery) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ds = append(q.ds, ds...)
	return nil
}

type hooksEnv struct {
	url    string
	hooks  *mysqlstore.Webhooks
	queue  *queued
	client *http.Client
}

// newHooksEnv serves the admin API's webhook endpoints on a migrated
// MariaDB database, refusing private addresses unless allowPrivate.
func newHooksEnv(t *testing.T, allowPrivate bool) *hooksEnv {
	t.Helper()
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	hooks := mysqlstore.NewWebhooks(db)
	t.Cleanup(hooks.Close)
	q := &queued{}
	svc := webhook.NewService(hooks, hooks, hooks, q, webhook.ServiceConfig{Guard: webhook.Guard{AllowPrivate: allowPrivate}})
	srv := httptest.NewServer(httpapi.NewRouter(httpapi.Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Admin: &admin.Service{}, AdminToken: token, Webhooks: svc,
	}))
	t.Cleanup(srv.Close)
	return &hooksEnv{url: srv.URL, hooks: hooks, queue: q, client: apitest.Client(t)}
}

func (e *hooksEnv) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func errField(m map[string]any) (code, field string) {
	e, _ := m["error"].(map[string]any)
	code, _ = e["code"].(string)
	field, _ = e["field"].(string)
	return code, field
}

// An endpoint's life through the admin API: created with its secret shown
// once, read without it, changed, its secret rotated (both sign for the
// window), deleted. Bad input is a 400 naming the field, and changes
// nothing.
func TestAdminWebhooks_endpointLifecycle(t *testing.T) {
	e := newHooksEnv(t, true)
	code, ep := e.call(t, "POST", "/admin/v1/webhook-endpoints",
		`{"url":"http://127.0.0.1:9/hooks","events":["order.paid","order.accepted","order.paid"],"description":"warehouse"}`)
	secret, _ := ep["secret"].(string)
	if code != 201 || !strings.HasPrefix(secret, "whsec_") || ep["enabled"] != true {
		t.Fatalf("create: %d %v", code, ep)
	}
	if evs := fmt.Sprint(ep["events"]); evs != "[order.accepted order.paid]" {
		t.Fatalf("events %s: want them sorted, once each", evs)
	}
	id := int64(ep["id"].(float64))
	path := fmt.Sprintf("/admin/v1/webhook-endpoints/%d", id)
	if code, got := e.call(t, "GET", path, ""); code != 200 || got["secret"] != nil || got["url"] != "http://127.0.0.1:9/hooks" {
		t.Fatalf("get: %d %v (the secret is shown once)", code, got)
	}
	if code, got := e.call(t, "GET", "/admin/v1/webhook-endpoints", ""); code != 200 || len(got["items"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, got)
	}

	for _, tc := range []struct{ body, field string }{
		{`{"url":"ftp://127.0.0.1/","events":["*"]}`, "url"},
		{`{"url":"http://127.0.0.1/","events":["order.shipped"]}`, "events"},
		{`{"url":"http://127.0.0.1/","events":[]}`, "events"},
		{`{"url":"http://127.0.0.1/","events":["*","order.paid"]}`, "events"},
		{`{"url":"http://127.0.0.1/","events":["*"],"secret":"mine"}`, "secret"},
		{`{"events":["*"]}`, "url"},
	} {
		if code, got := e.call(t, "POST", "/admin/v1/webhook-endpoints", tc.body); code != 400 {
			t.Errorf("%s: %d %v", tc.body, code, got)
		} else if c, f := errField(got); c != "INVALID_ARGUMENT" || f != tc.field {
			t.Errorf("%s: %s on %q, want the field %q", tc.body, c, f, tc.field)
		}
	}

	code, got := e.call(t, "PATCH", path, `{"events":["*"],"enabled":false}`)
	if code != 200 || got["enabled"] != false || fmt.Sprint(got["events"]) != "[*]" {
		t.Fatalf("patch: %d %v", code, got)
	}
	if code, got := e.call(t, "PATCH", path, `{"events":[]}`); code != 400 {
		t.Fatalf("patch to no events: %d %v", code, got)
	}

	code, rotated := e.call(t, "POST", path+"/rotate-secret", "")
	newSecret, _ := rotated["secret"].(string)
	if code != 200 || newSecret == "" || newSecret == secret || rotated["previous_secret_expires_at"] == nil {
		t.Fatalf("rotate: %d %v", code, rotated)
	}
	stored, err := e.hooks.Endpoint(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := stored.Secrets(time.Now()); len(s) != 2 || s[0] != newSecret || s[1] != secret {
		t.Fatalf("during the window the secrets are %v", s)
	}

	if code, got := e.call(t, "DELETE", path, ""); code != 200 || got["deleted"] != true {
		t.Fatalf("delete: %d %v", code, got)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if code, got := e.call(t, m, path, ""); code != 404 {
			t.Fatalf("%s after delete: %d %v", m, code, got)
		}
	}
}

// Without WEBHOOK_ALLOW_PRIVATE a URL on a loopback or private address is
// refused when it is set, by its name too.
func TestAdminWebhooks_privateAddresses_refusedUnlessAllowed(t *testing.T) {
	e := newHooksEnv(t, false)
	for _, u := range []string{"http://127.0.0.1:8080/x", "http://localhost/x", "http://169.254.169.254/latest/meta-data",
		"http://[::1]/x", "http://10.1.2.3/x"} {
		code, got := e.call(t, "POST", "/admin/v1/webhook-endpoints", `{"url":"`+u+`","events":["*"]}`)
		if c, f := errField(got); code != 400 || c != "INVALID_ARGUMENT" || f != "url" {
			t.Errorf("%s: %d %v", u, code, got)
		}
	}
	if _, got := e.call(t, "GET", "/admin/v1/webhook-endpoints", ""); len(got["items"].([]any)) != 0 {
		t.Fatalf("refused endpoints were recorded: %v", got)
	}
}

// The delivery log reads back newest first, for one event too; redeliver
// queues the event again as a delivery of its own, and is refused for an
// unknown event or a disabled endpoint.
func TestAdminWebhooks_deliveriesAndRedeliver(t *testing.T) {
	e := newHooksEnv(t, true)
	_, ep := e.call(t, "POST", "/admin/v1/webhook-endpoints", `{"url":"http://127.0.0.1:9/hooks","events":["*"]}`)
	id := int64(ep["id"].(float64))
	path := fmt.Sprintf("/admin/v1/webhook-endpoints/%d", id)
	at := time.Now()
	ev := webhook.OrderEvents(webhook.OrderChange{Order: order.Order{No: "42-06H0J68TSYHN2J2MDXSS60AGDR", ActivityID: 42,
		UserID: 1, Quantity: 1, Status: order.PendingPayment, CreatedAt: at}})[0]
	if err := e.hooks.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	e.hooks.Record(webhook.Attempt{EndpointID: id, EventID: ev.ID, Type: ev.Type, Number: 1, Status: 503,
		Latency: 12 * time.Millisecond, Error: "answered 503", At: at})
	e.hooks.Record(webhook.Attempt{EndpointID: id, EventID: ev.ID, Type: ev.Type, Number: 2, Status: 200,
		Latency: 3 * time.Millisecond, Delivered: true, Last: true, At: at.Add(5 * time.Second)})
	waitFor(t, "the log written", func() bool {
		_, total, _ := e.hooks.Attempts(context.Background(), id, "", 1, 10)
		return total == 2
	})
	code, got := e.call(t, "GET", path+"/deliveries?event_id="+ev.ID, "")
	items, _ := got["items"].([]any)
	if code != 200 || len(items) != 2 || got["total"] != 2.0 {
		t.Fatalf("deliveries: %d %v", code, got)
	}
	first := items[0].(map[string]any)
	if first["attempt"] != 2.0 || first["delivered"] != true || first["http_status"] != 200.0 || first["latency_ms"] != 3.0 {
		t.Fatalf("the newest attempt: %v", first)
	}

	code, got = e.call(t, "POST", path+"/events/"+ev.ID+"/redeliver", "")
	if code != 202 || got["event_id"] != ev.ID || len(e.queue.ds) != 1 || !e.queue.ds[0].Manual ||
		string(e.queue.ds[0].Body) != string(ev.Body) {
		t.Fatalf("redeliver: %d %v, queued %+v", code, got, e.queue.ds)
	}
	if code, _ := e.call(t, "POST", path+"/events/evt_NOSUCHEVENT/redeliver", ""); code != 404 {
		t.Fatalf("an unknown event: %d", code)
	}
	e.call(t, "PATCH", path, `{"enabled":false}`)
	if code, got := e.call(t, "POST", path+"/events/"+ev.ID+"/redeliver", ""); code != 409 {
		t.Fatalf("to a disabled endpoint: %d %v", code, got)
	}
	if code, _ := e.call(t, "GET", "/admin/v1/webhook-endpoints/999/deliveries", ""); code != 404 {
		t.Fatalf("deliveries of no endpoint: %d", code)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
