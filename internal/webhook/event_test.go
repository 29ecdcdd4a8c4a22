package webhook_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/webhook"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC)

func anOrder(status order.Status) webhook.OrderChange {
	o := order.Order{No: "42-06H0J68TSYHN2J2MDXSS60AGDR", ActivityID: 42, UserID: 7, Quantity: 2, PriceCents: 500,
		AmountCents: 1000, Status: status, CreatedAt: t0, PayBy: t0.Add(15 * time.Minute)}
	c := webhook.OrderChange{Order: o, SKU: "PH-X", Currency: "cny"}
	switch status {
	case order.Paid, order.Refunded:
		c.Order.PaidAt, c.Order.PaymentID = t0.Add(time.Minute), "pi_1"
		if status == order.Refunded {
			c.RefundedAt = t0.Add(time.Hour)
		}
	case order.Cancelled:
		c.Order.CancelledAt, c.Reason = t0.Add(15*time.Minute), webhook.CancelTimeout
	}
	return c
}

// Whichever state of an order a producer sees, it derives the same events
// up to it — the same ids, sequences and bytes — so appending them all at
// every change gives a receiver a complete sequence and never two
// versions of one event.
func TestOrderEvents_fromAnyLaterState_areTheSameEvents(t *testing.T) {
	pending := webhook.OrderEvents(anOrder(order.PendingPayment))
	paid := webhook.OrderEvents(anOrder(order.Paid))
	refunded := webhook.OrderEvents(anOrder(order.Refunded))
	cancelled := webhook.OrderEvents(anOrder(order.Cancelled))
	seqs := func(es []webhook.Event) (out []string) {
		for _, e := range es {
			out = append(out, string(e.Type)+"#"+strconv.FormatInt(e.Sequence, 10))
		}
		return out
	}
	for _, tc := range []struct {
		got  []webhook.Event
		want []string
	}{
		{pending, []string{"order.accepted#1"}},
		{paid, []string{"order.accepted#1", "order.paid#2"}},
		{refunded, []string{"order.accepted#1", "order.paid#2", "order.refunded#3"}},
		{cancelled, []string{"order.accepted#1", "order.cancelled#2"}},
	} {
		if got := seqs(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("events %v, want %v", got, tc.want)
		}
	}
	same := func(a, b webhook.Event) bool {
		return a.ID == b.ID && string(a.Body) == string(b.Body) && a.At.Equal(b.At)
	}
	if !same(pending[0], paid[0]) || !same(pending[0], refunded[0]) || !same(pending[0], cancelled[0]) {
		t.Errorf("order.accepted differs by the state it was derived from:\n%s\n%s", pending[0].Body, refunded[0].Body)
	}
	if !same(paid[1], refunded[1]) {
		t.Errorf("order.paid differs:\n%s\n%s", paid[1].Body, refunded[1].Body)
	}
	if paid[1].ID == cancelled[1].ID {
		t.Error("order.paid and order.cancelled, both sequence 2, share an id")
	}
}

// The body is the Standard Webhooks shape, the time the change's own, and
// the data what a receiver needs without calling back.
func TestOrderEvents_body_isTheSpecsShapeWithTheOrder(t *testing.T) {
	es := webhook.OrderEvents(anOrder(order.Cancelled))
	var b struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	if err := json.Unmarshal(es[1].Body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Type != "order.cancelled" || b.Timestamp != "2026-12-01T10:15:00.123Z" {
		t.Errorf("type %q, timestamp %q", b.Type, b.Timestamp)
	}
	want := map[string]any{"order_no": "42-06H0J68TSYHN2J2MDXSS60AGDR", "activity_id": 42.0, "user_id": 7.0, "sku": "PH-X",
		"quantity": 2.0, "amount_cents": 1000.0, "currency": "cny", "status": "cancelled", "sequence": 2.0, "reason": "timeout"}
	for k, v := range want {
		if b.Data[k] != v {
			t.Errorf("data.%s = %v, want %v (data %v)", k, b.Data[k], v, b.Data)
		}
	}
	if len(b.Data) != len(want) {
		t.Errorf("data has %d fields, want %d: %v", len(b.Data), len(want), b.Data)
	}
	if !regexp.MustCompile(`^evt_[0-9A-HJKMNP-TV-Z]{26}$`).MatchString(es[1].ID) {
		t.Errorf("id %q", es[1].ID)
	}
}

func TestOtherEvents_subjectsAndSequences(t *testing.T) {
	a := activity.Activity{ID: 42, Name: "Phone X", SKU: "PH-X", Status: activity.Closed, Version: 7}
	closed := webhook.ActivityEvent(webhook.ActivityClosed, a, t0)
	if closed.Subject != "42" || closed.Sequence != 7 || closed.ActivityID != 42 || closed.Type != webhook.ActivityClosed {
		t.Errorf("activity.closed %+v", closed)
	}
	p := payment.Payment{ID: "pi_9", OrderNo: "42-X", ActivityID: 42, AmountCents: 1000, Currency: "cny", Flag: payment.Late}
	flagged := webhook.PaymentFlaggedEvent(p, t0)
	if flagged.Subject != "pi_9" || flagged.Sequence != 1 || flagged.ID != webhook.ID(webhook.PaymentFlagged, "pi_9", 1) {
		t.Errorf("payment.flagged %+v", flagged)
	}
	g := order.Group{ID: "42-G", ActivityID: 42, Status: order.Failed, Size: 3,
		MemberOrders: map[int64]string{9: "42-C", 7: "42-A", 8: "42-B"}}
	first, ok := webhook.GroupEvent(g, t0)
	again, _ := webhook.GroupEvent(g, t0)
	if !ok || first.Type != webhook.GroupFailed || string(first.Body) != string(again.Body) {
		t.Errorf("group.failed %s / %s", first.Body, again.Body)
	}
	if _, ok := webhook.GroupEvent(order.Group{Status: order.Forming}, t0); ok {
		t.Error("a forming group has an event")
	}
}

// An order's (or a group's) event ids begin with its number's time (the
// first 9 characters after "evt_" are 45 of its 48 bits; the 10th mixes
// the last 3 with the hash's first 2): the ids of later orders sort later, byte for byte as strings (Crockford's
// alphabet is in ASCII order), whatever their hashes; they keep the shape
// "evt_" and 26 characters; other subjects' ids are the hash alone, and an
// id is the same however often it is derived.
func TestID_ordersSortByTheirTime_othersHashed(t *testing.T) {
	shape := regexp.MustCompile(`^evt_[0-9A-HJKMNP-TV-Z]{26}$`)
	var prev string
	for i := range 50 {
		no := order.NewNo(int64(i%7 + 1))
		if i%5 == 4 {
			no = order.InShard(no, 1, 3)
		}
		id := webhook.ID(webhook.OrderAccepted, no, int64(50-i))
		if !shape.MatchString(id) || id != webhook.ID(webhook.OrderAccepted, no, int64(50-i)) {
			t.Fatalf("id %q of %s", id, no)
		}
		if prev != "" && id[:13] < prev[:13] {
			t.Fatalf("an order numbered later has an id that sorts before: %s after %s", id, prev)
		}
		prev = id
		time.Sleep(2 * time.Millisecond)
	}
	a, b := webhook.ID(webhook.OrderAccepted, "42-06H0J68TSYHN2J2MDXSS60AGDR", 1), webhook.ID(webhook.OrderPaid, "42-06H0J68TSYHN2J2MDXSS60AGDR", 2)
	if a[:13] != b[:13] || a == b {
		t.Fatalf("two events of one order: %s %s; want one time prefix, two ids", a, b)
	}
	x, y := webhook.ID(webhook.ActivityClosed, "42", 3), webhook.ID(webhook.ActivityClosed, "43", 3)
	if !shape.MatchString(x) || x[:10] == y[:10] {
		t.Fatalf("a sale's event ids %s %s: want hashes", x, y)
	}
}

// LaterOrderEvents, what the worker's write appends, is OrderEvents
// without order.accepted (the order's row), the same events to the byte.
func TestLaterOrderEvents_areOrderEventsAfterAccepted(t *testing.T) {
	for _, st := range []order.Status{order.PendingPayment, order.Paid, order.Refunded, order.Cancelled} {
		all, later := webhook.OrderEvents(anOrder(st)), webhook.LaterOrderEvents(anOrder(st))
		if len(later) != len(all)-1 {
			t.Fatalf("%s: %d later events of %d", st, len(later), len(all))
		}
		for i, e := range later {
			if w := all[i+1]; e.ID != w.ID || e.Type != w.Type || e.Sequence != w.Sequence || string(e.Body) != string(w.Body) {
				t.Fatalf("%s: later event %d is %s %s, want %s %s", st, i, e.Type, e.Body, w.Type, w.Body)
			}
		}
	}
}
