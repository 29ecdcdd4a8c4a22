package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// An order's refund, shown: money confirmed after the order timed out is
// refunded through the provider (stripe-mock), and the admin API's order
// view and the console's order lookup name the refund beside the payment.
func TestConsole_orderLookup_showsTheRefundOfLateMoney(t *testing.T) {
	waits(t)
	chromium := testenv.Chromium(t)
	s := newStripeStack(t)
	act := s.sale(10, 2, 10) // 10 s to pay: the shortest allowed
	no := s.order(1, act, 1).str("order_no")
	if p := s.pay(1, no); p.code != 200 {
		t.Fatalf("pay: %d %v", p.code, p.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'cancelled'", no)
	pi := "pi_late_console_" + no
	if w := s.succeeded("evt_late_console", pi, no, 500); w.code != 200 {
		t.Fatalf("the late confirmation: %d %v", w.code, w.body)
	}
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM refunds WHERE payment_id = ?", pi)
	var refund string
	if err := s.db.QueryRow("SELECT refund_id FROM refunds WHERE payment_id = ?", pi).Scan(&refund); err != nil || refund == "" {
		t.Fatalf("the refund's id: %q, %v", refund, err)
	}
	view := s.admin("GET", "/admin/v1/orders/"+no, "")
	if view.code != 200 || !strings.Contains(fmt.Sprint(view.body), refund) {
		t.Fatalf("the admin's order view: %d %v; want refund %s named", view.code, view.body, refund)
	}

	b := newBrowser(t, chromium, s.base)
	b.openLive(act)
	b.fill("#order-no", no)
	b.click("#order-form button[type=submit]")
	b.waitText("#order-status", is("cancelled"))
	if list := b.text("#order-payments"); !strings.Contains(list, pi) || !strings.Contains(list, "refunded ("+refund+")") {
		t.Fatalf("the console's order %s: payments %q; want %s refunded (%s)", no, list, pi, refund)
	}
}
