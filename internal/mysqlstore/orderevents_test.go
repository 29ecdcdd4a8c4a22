package mysqlstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// outbox is every event in db's outbox, in append order.
func outbox(t *testing.T, db *gorm.DB) []webhook.Event { t.Helper(); return outboxIn(t, db, "cny") }

// outboxIn is outbox with the orders' order.accepted (their rows) read in
// currency, the orders' store's.
func outboxIn(t *testing.T, db *gorm.DB, currency string) []webhook.Event {
	t.Helper()
	w := mysqlstore.NewWebhooks(db)
	w.SetCurrency(currency)
	es, _, err := w.Undispatched(context.Background(), 10_000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// eventData is an event body's data.
func eventData(t *testing.T, e webhook.Event) map[string]any {
	t.Helper()
	var b struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(e.Body, &b); err != nil {
		t.Fatal(err)
	}
	return b.Data
}

// hook records what OnCommit is given, and whether the batch's rows were
// already visible to another connection then (committed).
type hook struct {
	mu     sync.Mutex
	calls  [][]webhook.Event
	unseen int // calls at which an event's row was not yet readable elsewhere
}

func (h *hook) on(db *gorm.DB) func(context.Context, []webhook.Event) {
	return func(_ context.Context, es []webhook.Event) {
		// An order.accepted is its order's row (migrations/00018), the
		// others rows of webhook_events.
		var n, accepted int64
		ids, nos := []string{""}, []string{""}
		for _, e := range es {
			if e.Type == webhook.OrderAccepted {
				nos = append(nos, e.Subject)
			} else {
				ids = append(ids, e.ID)
			}
		}
		db.Raw("SELECT COUNT(*) FROM webhook_events WHERE id IN ?", ids).Scan(&n)
		db.Raw("SELECT COUNT(*) FROM orders WHERE order_no IN ? AND event_seq IS NOT NULL", nos).Scan(&accepted)
		n += accepted
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, es)
		if int(n) != len(es) {
			h.unseen++
		}
	}
}

func (h *hook) n() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.calls) }

// An order batch writes its rows and their events in one transaction: each
// order's events up to its state (accepted; paid; cancelled with its
// reason, or "unknown" for a record from before reasons; refunded at its
// record's refund time), with the item's SKU or, for an order without
// one, the activity's, and the store's currency; writing the same states
// again adds no row; OnCommit gets each batch's events once committed.
func TestOrders_writeMany_appendsEachOrdersEvents_inItsTransaction(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	acts := mysqlstore.NewActivities(db)
	a := sample()
	a.Type, a.GroupSize, a.GroupTTL, a.SKU = activity.Seckill, 0, 0, "FLAT-1"
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.NewOrdersWith(db, mysqlstore.WriteOptions{Currency: "usd"})
	var h hook
	s.OnCommit = h.on(db)
	t.Cleanup(s.Close)

	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(no string) order.Order {
		return order.Order{No: no, ActivityID: a.ID, UserID: 7, Quantity: 1, PriceCents: 500, AmountCents: 500,
			Status: order.PendingPayment, CreatedAt: t0, Item: "PH-RED"}
	}
	shopper, timeout, old, paid, refunded, flat := mk("1-SHOP"), mk("1-TIME"), mk("1-OLD"), mk("1-PAID"), mk("1-REFD"), mk("1-FLAT")
	flat.Item = ""
	all := []order.Order{shopper, timeout, old, paid, refunded, flat}
	if err := s.WriteMany(ctx, all); err != nil {
		t.Fatal(err)
	}
	if got := outboxIn(t, db, "usd"); len(got) != 6 {
		t.Fatalf("%d events after 6 accepted orders, want 6 order.accepted", len(got))
	}
	end := func(o *order.Order, st order.Status, fence int64) { o.Status, o.Fence = st, fence }
	end(&shopper, order.Cancelled, 2)
	shopper.CancelledAt, shopper.CancelReason = t0.Add(time.Minute), order.CancelShopper
	end(&timeout, order.Cancelled, 2)
	timeout.CancelledAt, timeout.CancelReason = t0.Add(15*time.Minute), order.CancelTimeout
	end(&old, order.Cancelled, 2)
	old.CancelledAt = t0.Add(2 * time.Minute) // a record cancelled before it carried a reason
	end(&paid, order.Paid, 2)
	paid.PaidAt, paid.PaymentID = t0.Add(time.Minute), "pi_1"
	end(&refunded, order.Refunded, 3)
	refunded.PaidAt, refunded.PaymentID = t0.Add(time.Minute), "pi_2"
	refunded.RefundedAt, refunded.CancelledAt = t0.Add(time.Hour), t0.Add(time.Hour)
	all = []order.Order{shopper, timeout, old, paid, refunded, flat}
	for range 2 { // the second time: the same states again, nothing new
		if err := s.WriteMany(ctx, all); err != nil {
			t.Fatal(err)
		}
	}
	got := outboxIn(t, db, "usd")
	by := map[string][]webhook.Event{}
	for _, e := range got {
		by[e.Subject] = append(by[e.Subject], e)
	}
	if len(got) != 12 {
		t.Fatalf("%d events, want 12 (6 accepted, 3 cancelled, 2 paid, 1 refunded)", len(got))
	}
	check := func(no string, want ...webhook.Type) []webhook.Event {
		t.Helper()
		es := by[no]
		if len(es) != len(want) {
			t.Fatalf("%s: %d events, want %v", no, len(es), want)
		}
		for i, e := range es {
			if e.Type != want[i] || e.Sequence != int64(i+1) {
				t.Fatalf("%s: event %d is %s #%d, want %s #%d", no, i, e.Type, e.Sequence, want[i], i+1)
			}
			if d := eventData(t, e); d["currency"] != "usd" {
				t.Fatalf("%s: currency %v, want the store's usd", no, d["currency"])
			}
		}
		return es
	}
	reason := func(no string) any {
		return eventData(t, check(no, webhook.OrderAccepted, webhook.OrderCancelled)[1])["reason"]
	}
	if r := reason("1-SHOP"); r != "shopper" {
		t.Fatalf("shopper's cancel: reason %v", r)
	}
	if r := reason("1-TIME"); r != "timeout" {
		t.Fatalf("timeout's cancel: reason %v", r)
	}
	if r := reason("1-OLD"); r != "unknown" {
		t.Fatalf("a cancel recorded before reasons: reason %v, want unknown", r)
	}
	check("1-PAID", webhook.OrderAccepted, webhook.OrderPaid)
	es := check("1-REFD", webhook.OrderAccepted, webhook.OrderPaid, webhook.OrderRefunded)
	if !es[2].At.Equal(t0.Add(time.Hour)) || eventData(t, es[2])["payment_id"] != "pi_2" {
		t.Fatalf("refund at %v (%s), want the record's refund time %v", es[2].At, es[2].Body, t0.Add(time.Hour))
	}
	if d := eventData(t, check("1-FLAT", webhook.OrderAccepted)[0]); d["sku"] != "FLAT-1" {
		t.Fatalf("an order without an item: sku %v, want its activity's FLAT-1", d["sku"])
	}
	if d := eventData(t, by["1-PAID"][0]); d["sku"] != "PH-RED" {
		t.Fatalf("an order of an item: sku %v, want the item's", d["sku"])
	}
	var reasonCol *string
	if err := db.Raw("SELECT cancel_reason FROM orders WHERE order_no = '1-TIME'").Row().Scan(&reasonCol); err != nil || reasonCol == nil || *reasonCol != "timeout" {
		t.Fatalf("orders.cancel_reason %v (%v), want timeout", reasonCol, err)
	}
	if o, _ := s.Get(ctx, "1-REFD"); !o.RefundedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("read back: refunded at %v", o.RefundedAt)
	}
	// Each batch's events, after its commit: 3 batches (written one after
	// the other), each handed all it derived (appended or already there)
	// but its orders' order.accepted, which is their rows: the first, six
	// orders accepted, handed nothing.
	if h.n() != 2 || h.unseen != 0 {
		t.Fatalf("OnCommit called %d times (want 2), %d of them before the events were committed", h.n(), h.unseen)
	}
	for i, c := range h.calls {
		if len(c) != 6 || slices.ContainsFunc(c, func(e webhook.Event) bool { return e.Type == webhook.OrderAccepted }) {
			t.Fatalf("batch %d of the ended orders handed %d events, want the 6 it derived after their order.accepted", i+1, len(c))
		}
	}
}

// An order batch whose events cannot be appended (the outbox's clock
// gone: every batch takes it, for its orders' event_seq) writes no row
// either (one transaction), answers the error, and OnCommit is not called.
func TestOrders_writeMany_eventsFail_rollsBackTheRows_noOnCommit(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	s := mysqlstore.NewOrders(db)
	var h hook
	s.OnCommit = h.on(db)
	t.Cleanup(s.Close)
	if err := db.Exec("RENAME TABLE webhook_outbox_clock TO webhook_outbox_clock_away").Error; err != nil {
		t.Fatal(err)
	}
	o := order.Order{No: "1-ROLLED", ActivityID: 1, UserID: 7, Quantity: 1, PriceCents: 5, AmountCents: 5,
		Status: order.Paid, Fence: 2, CreatedAt: time.Now(), PaidAt: time.Now(), PaymentID: "pi_R", Item: "X"}
	if err := s.Write(ctx, o); err == nil {
		t.Fatal("write with no outbox table succeeded")
	}
	var n int64
	db.Raw("SELECT COUNT(*) FROM orders").Scan(&n)
	if n != 0 || h.n() != 0 {
		t.Fatalf("after a failed transaction: %d order rows (want 0), OnCommit called %d times (want 0)", n, h.n())
	}
	if err := db.Exec("RENAME TABLE webhook_outbox_clock_away TO webhook_outbox_clock").Error; err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got := outbox(t, db); len(got) != 2 || h.n() != 1 {
		t.Fatalf("written again: %d events, %d OnCommit calls; want 2 (accepted, its row; paid) and 1", len(got), h.n())
	}
}

// The order that took a flash sale's last unit carries the sale's version:
// its write appends activity.sold_out with that version as its sequence,
// once however often it is written; a second sell-out at the same version
// (a unit given back and sold again) is the same event; one after a
// restock (a new version) is a second event.
func TestOrders_soldOutOrder_appendsActivitySoldOut_oncePerVersion(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	acts := mysqlstore.NewActivities(db)
	a := sample()
	a.Type, a.GroupSize, a.GroupTTL = activity.Seckill, 0, 0
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.NewOrders(db)
	t.Cleanup(s.Close)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	mk := func(no string, version int64) order.Order {
		return order.Order{No: no, ActivityID: a.ID, UserID: 7, Quantity: 1, PriceCents: 5, AmountCents: 5,
			Status: order.PendingPayment, CreatedAt: t0, SoldOutVersion: version}
	}
	for _, o := range []order.Order{mk("1-LAST", 3), mk("1-LAST", 3), mk("1-OTHER", 0), mk("1-AGAIN", 3), mk("1-RESTOCKED", 4)} {
		if err := s.Write(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	var sold []webhook.Event
	for _, e := range outbox(t, db) {
		if e.Type == webhook.ActivitySoldOut {
			sold = append(sold, e)
		}
	}
	if len(sold) != 2 || sold[0].Sequence != 3 || sold[1].Sequence != 4 {
		t.Fatalf("activity.sold_out events %+v, want versions 3 and 4", sold)
	}
	if d := eventData(t, sold[0]); d["name"] != a.Name || d["sku"] != "PH-1" || d["status"] != "published" || !sold[0].At.Equal(t0) {
		t.Fatalf("sold_out %s at %v", sold[0].Body, sold[0].At)
	}
}

// A group's end appends its event in the write's transaction, of the end
// MySQL records: once, however often the group is written, and none for a
// picture the row refuses (a success after a failure) nor while forming.
func TestOrders_writeGroup_appendsItsEnd_once(t *testing.T) {
	db := migrated(t)
	ctx := context.Background()
	s := mysqlstore.NewOrders(db)
	var h hook
	s.OnCommit = h.on(db)
	t.Cleanup(s.Close)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	g := order.Group{ID: "7-06GZZPMPBT54SVAZ", ActivityID: 7, Status: order.Forming, Size: 2, LeaderID: 1,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), MemberOrders: map[int64]string{1: "7-A", 2: "7-B"}}
	write := func(st order.GroupStatus) {
		t.Helper()
		g.Status = st
		if st == order.Failed {
			g.EndedAt = t0.Add(time.Hour + time.Second)
		}
		if err := s.WriteGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	write(order.Forming)
	if n := len(outbox(t, db)); n != 0 || h.n() != 0 {
		t.Fatalf("forming: %d events, %d hook calls", n, h.n())
	}
	write(order.Failed)
	write(order.Failed)
	write(order.Succeeded) // refused by the row: no event of it
	got := outbox(t, db)
	if len(got) != 1 || got[0].Type != webhook.GroupFailed || got[0].Subject != g.ID || !got[0].At.Equal(t0.Add(time.Hour+time.Second)) {
		t.Fatalf("events %+v, want one group.failed at the failure's time", got)
	}
	if d := eventData(t, got[0]); len(d["members"].([]any)) != 2 {
		t.Fatalf("group.failed data %v", d)
	}
	if h.n() != 2 || h.unseen != 0 {
		t.Fatalf("OnCommit: %d calls (want 2: each failed write), %d before commit", h.n(), h.unseen)
	}
}
