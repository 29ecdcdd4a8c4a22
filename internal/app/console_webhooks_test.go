package app_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
)

// sink is a receiver in the test's process that checks each delivery with
// the secret the console showed, and counts what it verified by event id.
type sink struct {
	mu      sync.Mutex
	secrets []string
	got     map[string]int
	bad     int
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sec := range s.secrets {
		if wh, err := standardwebhooks.NewWebhook(sec); err == nil && wh.Verify(body, r.Header) == nil {
			s.got[r.Header.Get(webhook.HeaderID)]++
			return
		}
	}
	s.bad++
	w.WriteHeader(http.StatusBadRequest)
}

func (s *sink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[id]
}

// The console's webhook page in a real browser: a URL the API refuses is
// named beside its field; an endpoint created shows its secret once, with
// which a receiver verifies the deliveries that follow; its delivery log
// lists them and sends one again; it is turned off and on, its secret
// rotated (the new one shown once, the old one's end said), and deleted.
func TestConsole_webhookEndpoints_createWatchRedeliverRotateDelete(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStackWith(t, "", map[string]string{"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_DISPATCH_INTERVAL": "50ms"})
	s.worker()
	rcv := &sink{got: map[string]int{}}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	b := newBrowser(t, chromium, s.base)
	b.open("/admin")
	b.signIn(adminToken)
	b.waitVisible("#activities")
	b.click(`#nav a[href="#/webhooks"]`)
	b.waitVisible("#hook-form")
	b.waitVisible("#hooks-empty")

	// A URL the API refuses: its message beside the field, nothing made.
	b.fill("#h-url", "ftp://"+strings.TrimPrefix(srv.URL, "http://")+"/hooks")
	b.click("#hook-create")
	b.waitText("#herr-url", contains("must be http or https"))

	b.fill("#h-url", srv.URL+"/hooks")
	b.fill("#h-description", "the warehouse")
	b.click("#hook-create")
	b.waitVisible("#hook-secret-box")
	secret := b.text("#hook-secret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the secret shown: %q", secret)
	}
	rcv.mu.Lock()
	rcv.secrets = []string{secret}
	rcv.mu.Unlock()
	b.waitText("#hook-list tbody .h-state", is("enabled"))
	if got := b.text("#hook-list tbody .h-events"); got != "*" {
		t.Fatalf("events %q", got)
	}
	b.screenshot("webhooks")
	b.click("#hook-secret-done")
	if b.visible("#hook-secret-box") {
		t.Fatal("the secret stays on the page")
	}

	// An order event, delivered and verified with the secret the page showed.
	db, err := connect.MySQL(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	hooks := mysqlstore.NewWebhooks(db)
	t.Cleanup(hooks.Close)
	ev := webhook.OrderEvents(webhook.OrderChange{Order: order.Order{No: order.NewNo(7), ActivityID: 7, UserID: 1, Quantity: 1,
		Status: order.PendingPayment, CreatedAt: time.Now()}, SKU: "S", Currency: "cny"})[0]
	if err := hooks.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the delivery verified", func() string { return strings.Repeat("x", rcv.count(ev.ID)) }, is("x"))

	// Its delivery log, and a redelivery: the same id again.
	b.click("#hook-list tbody .h-log")
	b.waitText("#log-url", is(srv.URL+"/hooks"))
	// The page shows the log as it was when it opened: shown again (route,
	// as a hash change would) until the attempt's row is written.
	rerender := func() {
		var ok bool
		b.eval("route(), true", &ok)
		time.Sleep(300 * time.Millisecond) // its reads
	}
	b.waitFor("the attempt in the log", func() string { rerender(); return b.text("#log-rows tbody .l-outcome") },
		is("delivered"))
	if got := b.text("#log-rows tbody .l-event"); got != ev.ID {
		t.Fatalf("the log's event %q, want %s", got, ev.ID)
	}
	b.screenshot("webhook-log")
	b.click("#log-rows tbody .l-redeliver")
	b.waitText("#log-message", contains("Sent again"))
	b.waitFor("the redelivery verified", func() string { return strings.Repeat("x", rcv.count(ev.ID)) }, is("xx"))
	b.waitFor("the redelivery in the log", func() string { rerender(); return b.text("#log-rows tbody .l-type") },
		contains("(redelivery)"))
	// A recovery since an hour ago: the event once more, the same id.
	b.set("#recover-since", time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")) // the browser runs in UTC
	b.click("#recover")
	b.waitText("#log-message", contains("Queued again: 1 events"))
	b.waitFor("the recovery verified", func() string { return strings.Repeat("x", rcv.count(ev.ID)) }, is("xxx"))

	// Off and on again.
	b.click(`a.button[href="#/webhooks"]`)
	b.click("#hook-list tbody .h-toggle")
	b.waitText("#hook-list tbody .h-state", is("disabled"))
	b.click("#hook-list tbody .h-toggle")
	b.waitText("#hook-list tbody .h-state", is("enabled"))

	// A new secret, after a confirmation: shown once, with the old one's end.
	b.click("#hook-list tbody .h-rotate")
	b.waitVisible("#confirm")
	b.click("#confirm-ok")
	b.waitVisible("#hook-secret-box")
	if fresh := b.text("#hook-secret"); !strings.HasPrefix(fresh, "whsec_") || fresh == secret {
		t.Fatalf("after rotating the page shows %q", fresh)
	}
	b.waitText("#hook-secret-note", contains("previous secret signs too until"))
	atPhoneWidth(b, "the webhook endpoints")

	// Deleted, after a confirmation.
	b.click("#hook-list tbody .h-delete")
	b.waitVisible("#confirm")
	b.click("#confirm-ok")
	b.waitVisible("#hooks-empty")
	if r := s.admin("GET", "/admin/v1/webhook-endpoints", ""); len(r.body["items"].([]any)) != 0 {
		t.Fatalf("after delete: %v", r.body)
	}
	if rcv.bad != 0 {
		t.Fatalf("%d deliveries did not verify", rcv.bad)
	}
}
