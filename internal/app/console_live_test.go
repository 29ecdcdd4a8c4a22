package app_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The newcomer's case: an order just accepted, which the worker has not
// written to MySQL yet, shows on the live page as pending persistence (not
// as a problem), and once a worker writes it, in sync.
func TestConsole_livePage_anOrderNotYetInMySQL_showsPendingPersistenceNotAProblem(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "") // no worker yet
	id := s.activity("Phone", 10)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#recon-state", is("in sync"))

	if r := s.order(1, id, 1); r.code != 202 {
		t.Fatalf("order: %d %v", r.code, r.body)
	}
	b.waitText("#stock-remaining", is("9"))
	b.waitText("#recon-state", is("pending persistence"))
	if st, pending, problems := b.attr("#recon-state", "data-status"), b.text("#recon-pending"), b.count("#recon-problems li"); st != "pending" ||
		pending != "1 order (+1 unit)" || problems != 0 {
		t.Fatalf("an order on its way shows as %q, pending %q, with %d problems", st, pending, problems)
	}

	s.worker()
	b.waitText("#recon-state", is("in sync"))
	if pending, persisted := b.text("#recon-pending"), b.text("#persisted-units"); pending != "none" || persisted != "1" {
		t.Fatalf("recorded: pending %q, units persisted %q", pending, persisted)
	}
}

// openLive signs in with the admin token and opens activity id's live page.
func (b *browser) openLive(id int64) {
	b.t.Helper()
	b.open("/admin/")
	b.waitVisible("#token")
	b.signIn(adminToken)
	b.waitVisible("#activities")
	b.open(fmt.Sprintf("/admin/#/activities/%d", id))
}

// The console's payments card: the sale's payments at the (simulated)
// provider against MySQL's record, in sync once the worker recorded the
// payment; an order looked up shows its status, the payment that paid it
// and that payment's record; an unknown order is said to be none.
func TestConsole_paymentsCard_reconciliationAndAnOrdersPayment(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	s.worker()
	id := s.activity("Phone", 10)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	placed := s.order(1, id, 1)
	if placed.code != 202 {
		t.Fatalf("order: %d %v", placed.code, placed.body)
	}
	no := placed.str("order_no")
	paid := s.call("POST", "/v1/orders/"+no+"/pay", s.bearer(1), "")
	if paid.code != 200 || paid.str("status") != "paid" || paid.str("payment_id") == "" {
		t.Fatalf("pay: %d %v", paid.code, paid.body)
	}
	pid := paid.str("payment_id")
	deadline := time.Now().Add(15 * time.Second)
	for r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/payments", id), ""); r.body["in_sync"] != true; r = s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/payments", id), "") {
		if time.Now().After(deadline) {
			t.Fatalf("the reconciliation never in sync: %d %v; MySQL payments of %s: %d, of activity %d: %d", r.code, r.body,
				no, s.count("SELECT COUNT(*) FROM payments WHERE order_no = ?", no), id, s.count("SELECT COUNT(*) FROM payments WHERE activity_id = ?", id))
		}
		time.Sleep(100 * time.Millisecond)
	}

	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#pay-state", is("in sync"))
	if prov, at, rec, flagged := b.text("#pay-provider"), b.text("#pay-at-provider"), b.text("#pay-recorded"), b.text("#pay-flagged"); prov != "simulated" ||
		at != "1" || rec != "1" || flagged != "0" {
		t.Fatalf("payments card: provider %q, at the provider %q, recorded %q, flagged %q", prov, at, rec, flagged)
	}

	b.fill("#order-no", no)
	b.click("#order-form button[type=submit]")
	b.waitText("#order-status", is("paid"))
	if by, list := b.text("#order-paid-by"), b.text("#order-payments"); by != pid || !strings.Contains(list, pid+": succeeded") {
		t.Fatalf("order %s: paid by %q, payments %q; want %s, succeeded", no, by, list, pid)
	}
	b.fill("#order-no", fmt.Sprintf("%d-06H0J68TSYHN2J2MDXSS60AGDR", id))
	b.click("#order-form button[type=submit]")
	b.waitText("#order-message", contains("No order"))
}

// A console opened on a running sale draws its last minutes at once: the
// worker's reconciler samples each live sale every pass, the admin API
// serves the samples (GET …/series), and the live page seeds both charts
// from them before its first poll — the first point is from before the
// page opened. The series endpoint refuses a bad window, naming it, and
// answers 404 for an unknown sale.
func TestConsole_livePage_opensWithTheSalesLastMinutes(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	id := s.activity("Phone", 1000)
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		t.Fatalf("publish: %d %v", r.code, r.body)
	}
	s.worker()
	user := int64(0)
	for range 7 { // seven seconds of orders: three samples or more
		for range 5 {
			user++
			if r := s.order(user, id, 1); r.code != 202 {
				t.Fatalf("order: %d %v", r.code, r.body)
			}
		}
		time.Sleep(time.Second)
	}
	r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/series?minutes=5", id), "")
	samples, _ := r.body["samples"].([]any)
	if r.code != 200 || len(samples) < 3 {
		t.Fatalf("series: %d, %d samples %v; want 3+", r.code, len(samples), r.body)
	}
	last := -1.0
	for _, x := range samples {
		n := x.(map[string]any)["orders_accepted"].(float64)
		if n < last || n > float64(user) {
			t.Fatalf("samples %v: orders accepted must only grow, up to the %d placed", samples, user)
		}
		last = n
	}
	if r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d/series?minutes=60", id), ""); r.code != 400 ||
		r.body["error"].(map[string]any)["field"] != "minutes" {
		t.Fatalf("a window of 60 minutes: %d %v, want 400 naming minutes", r.code, r.body)
	}
	if r := s.admin("GET", "/admin/v1/activities/987654/series", ""); r.code != 404 {
		t.Fatalf("an unknown sale's series: %d %v, want 404", r.code, r.body)
	}

	opened := time.Now()
	b := newBrowser(t, chromium, s.base)
	b.openLive(id)
	b.waitText("#live-name", is("Phone"))
	for _, chart := range []string{"#chart-rate", "#chart-lag"} {
		points, _ := strconv.Atoi(b.attr(chart, "data-points"))
		from, _ := strconv.ParseInt(b.attr(chart, "data-from"), 10, 64)
		if points < 2 || from == 0 || time.UnixMilli(from).After(opened.Add(-2*time.Second)) {
			t.Errorf("%s at its first render: %d points from %v (the page opened at %v); want the sale's last seconds drawn",
				chart, points, time.UnixMilli(from).Format(time.TimeOnly), opened.Format(time.TimeOnly))
		}
	}
}
