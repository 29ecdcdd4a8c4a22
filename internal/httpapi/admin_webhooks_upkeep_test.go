package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// The endpoints' list is paged like the other admin lists, by id, with the
// total; a page out of bounds is a 400 naming its parameter.
func TestAdminWebhooks_list_paged(t *testing.T) {
	e := newHooksEnv(t, true)
	for i := range 3 {
		if code, got := e.call(t, "POST", "/admin/v1/webhook-endpoints",
			fmt.Sprintf(`{"url":"http://127.0.0.1:9/%d","events":["*"]}`, i)); code != 201 {
			t.Fatalf("create: %d %v", code, got)
		}
	}
	code, got := e.call(t, "GET", "/admin/v1/webhook-endpoints?page=2&page_size=2", "")
	items, _ := got["items"].([]any)
	if code != 200 || len(items) != 1 || got["total"] != 3.0 || got["page"] != 2.0 || got["page_size"] != 2.0 {
		t.Fatalf("page 2 of 2: %d %v", code, got)
	}
	if u := items[0].(map[string]any)["url"]; u != "http://127.0.0.1:9/2" {
		t.Fatalf("page 2's endpoint %v, want the third by id", u)
	}
	for _, q := range []string{"page=0", "page_size=0", "page_size=x", "page_size=100000"} {
		if code, got := e.call(t, "GET", "/admin/v1/webhook-endpoints?"+q, ""); code != 400 {
			t.Errorf("%s: %d %v", q, code, got)
		} else if c, f := errField(got); c != "INVALID_ARGUMENT" || !strings.HasPrefix(q, f+"=") {
			t.Errorf("%s: %s on %q", q, c, f)
		}
	}
}

// Recover queues again every event since a time of the types the endpoint
// subscribes to, oldest first, as a recovery's deliveries; it refuses a
// since older than the retention, in the future or not a time (400 naming
// since), a disabled endpoint (409) and no endpoint (404), queuing nothing.
func TestAdminWebhooks_recover_sinceATime_bounded(t *testing.T) {
	e := newHooksEnv(t, true)
	ctx := context.Background()
	_, ep := e.call(t, "POST", "/admin/v1/webhook-endpoints", `{"url":"http://127.0.0.1:9/hooks","events":["order.paid"]}`)
	id := int64(ep["id"].(float64))
	path := fmt.Sprintf("/admin/v1/webhook-endpoints/%d", id)
	at := time.Now()
	var paid []webhook.Event
	for i := range 70 { // more than a page: the recovery reads on
		es := webhook.OrderEvents(webhook.OrderChange{Order: order.Order{No: fmt.Sprintf("42-R%03d", i), ActivityID: 42,
			UserID: 1, Quantity: 1, Status: order.Paid, CreatedAt: at, PaidAt: at}})
		if err := e.hooks.Append(ctx, es...); err != nil {
			t.Fatal(err)
		}
		paid = append(paid, es[1]) // es[0] is order.accepted, which it does not subscribe to
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		body string
		code int
		err  string
	}{
		{`{"since":"` + time.Now().Add(-31*24*time.Hour).UTC().Format(time.RFC3339) + `"}`, 400, "INVALID_ARGUMENT"},
		{`{"since":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`, 400, "INVALID_ARGUMENT"},
		{`{"since":"yesterday"}`, 400, "INVALID_ARGUMENT"},
		{`{}`, 400, "INVALID_ARGUMENT"},
	} {
		code, got := e.call(t, "POST", path+"/recover", tc.body)
		if c, f := errField(got); code != tc.code || c != tc.err || f != "since" {
			t.Errorf("%s: %d %v", tc.body, code, got)
		}
	}
	if code, _ := e.call(t, "POST", "/admin/v1/webhook-endpoints/999/recover", `{"since":"`+since+`"}`); code != 404 {
		t.Errorf("no endpoint: %d", code)
	}
	if len(e.queue.ds) != 0 {
		t.Fatalf("refused recoveries queued %d", len(e.queue.ds))
	}

	code, got := e.call(t, "POST", path+"/recover", `{"since":"`+since+`"}`)
	if code != 202 || got["events"] != 70.0 || len(e.queue.ds) != 70 {
		t.Fatalf("recover: %d %v, queued %d", code, got, len(e.queue.ds))
	}
	for i, d := range e.queue.ds {
		if d.EventID != paid[i].ID || !d.Recovery || d.EndpointID != id || string(d.Body) != string(paid[i].Body) {
			t.Fatalf("queued %d: %+v, want %s as a recovery", i, d, paid[i].ID)
		}
	}
	e.call(t, "PATCH", path, `{"enabled":false}`)
	if code, got := e.call(t, "POST", path+"/recover", `{"since":"`+since+`"}`); code != 409 {
		t.Fatalf("a disabled endpoint: %d %v", code, got)
	}
}

// An event the retention pruned answers its redelivery 404 NOT_FOUND,
// saying it may have been pruned.
func TestAdminWebhooks_redeliver_prunedEvent_404(t *testing.T) {
	e := newHooksEnv(t, true)
	ctx := context.Background()
	_, ep := e.call(t, "POST", "/admin/v1/webhook-endpoints", `{"url":"http://127.0.0.1:9/hooks","events":["*"]}`)
	path := fmt.Sprintf("/admin/v1/webhook-endpoints/%d", int64(ep["id"].(float64)))
	ev := webhook.OrderEvents(webhook.OrderChange{Order: order.Order{No: "42-OLD", ActivityID: 42, UserID: 1, Quantity: 1,
		Status: order.PendingPayment, CreatedAt: time.Now()}})[0]
	if err := e.hooks.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, through, err := e.hooks.Undispatched(ctx, 10); err != nil || e.hooks.MarkDispatched(ctx, through) != nil {
		t.Fatalf("dispatch: %v", err)
	}
	if code, _ := e.call(t, "POST", path+"/events/"+ev.ID+"/redeliver", ""); code != 202 {
		t.Fatalf("before the prune: %d", code)
	}
	if n, err := e.hooks.PruneEvents(ctx, time.Now().Add(time.Second), 100); n != 1 || err != nil {
		t.Fatalf("prune: %d %v", n, err)
	}
	code, got := e.call(t, "POST", path+"/events/"+ev.ID+"/redeliver", "")
	msg, _ := got["error"].(map[string]any)["message"].(string)
	if c, _ := errField(got); code != 404 || c != "NOT_FOUND" || !strings.Contains(msg, "WEBHOOK_RETENTION") {
		t.Fatalf("a pruned event: %d %v", code, got)
	}
}
