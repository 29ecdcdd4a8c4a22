package webhook

import (
	"slices"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
)

// An order's events' sequence numbers, fixed by the status each reports:
// its status only moves pending_payment → paid → refunded or
// pending_payment → cancelled (internal/order), so whichever of its states
// a producer happened to see, the numbers it derives are the same and a
// receiver's sequence has no hole.
const (
	SeqAccepted  = 1
	SeqPaid      = 2
	SeqCancelled = 2
	SeqRefunded  = 3
)

// CancelReason says why an order was cancelled (order.cancelled's
// "reason"): the order's record's.
type CancelReason = order.CancelReason

// The reasons (order.cancelled's "reason").
const (
	CancelShopper     = order.CancelShopper     // the shopper cancelled it
	CancelTimeout     = order.CancelTimeout     // its payment time ran out
	CancelGroupFailed = order.CancelGroupFailed // its group did not fill in time
	// CancelUnknown is the reason of an order cancelled before its record
	// carried one (records written before 00012's release): the status
	// alone does not say which it was, and an event must not guess.
	CancelUnknown CancelReason = "unknown"
)

// OrderChange is what an order's events are derived from: the order as its
// record holds it, and what the record of the order does not say yet.
type OrderChange struct {
	Order order.Order
	// SKU is the activity's (the item's, once orders carry items).
	SKU string
	// Currency is the order's, ISO 4217 (PAYMENT_CURRENCY).
	Currency string
	// Reason is why a cancelled order was; "" takes the order's
	// (Order.CancelReason), and an order that has none (cancelled before
	// its record carried one) says CancelUnknown.
	Reason CancelReason
	// RefundedAt is when a refunded order was; zero takes the order's
	// (Order.RefundedAt, the record's refunded_ms), then its paid time.
	RefundedAt time.Time
}

// orderData is an order event's data.
type orderData struct {
	OrderNo     string       `json:"order_no"`
	ActivityID  int64        `json:"activity_id"`
	UserID      int64        `json:"user_id"`
	SKU         string       `json:"sku"`
	Quantity    int          `json:"quantity"`
	AmountCents int64        `json:"amount_cents"`
	Currency    string       `json:"currency"`
	Status      order.Status `json:"status"`
	Sequence    int64        `json:"sequence"`
	GroupID     string       `json:"group_id,omitempty"`
	PaymentID   string       `json:"payment_id,omitempty"`
	Reason      CancelReason `json:"reason,omitempty"`
}

// OrderEvents returns every event of c's order up to the state its record
// holds, oldest first: order.accepted, then order.paid (and
// order.refunded) or order.cancelled. Each reports the status it moved the
// order to and its own time from the record, so deriving them again from a
// later state gives the same events, ids and bodies: a producer appends
// them all with every change (AppendTx keeps one row an id) and needs no
// memory of what it produced before.
func OrderEvents(c OrderChange) []Event { return orderEvents(c, true) }

// LaterOrderEvents is OrderEvents without order.accepted: what the worker's
// write of an order appends, its order.accepted being the order's row
// (migrations/00018), rendered when read.
func LaterOrderEvents(c OrderChange) []Event { return orderEvents(c, false) }

func orderEvents(c OrderChange, accepted bool) []Event {
	o := c.Order
	reason := c.Reason
	if reason == "" {
		reason = o.CancelReason
	}
	if reason == "" {
		reason = CancelUnknown
	}
	refundedAt := orTime(c.RefundedAt, o.RefundedAt)
	ev := func(t Type, seq int64, status order.Status, at time.Time, paymentID string, reason CancelReason) Event {
		return newOrderEvent(t, seq, at, &orderData{
			OrderNo: o.No, ActivityID: o.ActivityID, UserID: o.UserID, SKU: c.SKU, Quantity: o.Quantity,
			AmountCents: o.AmountCents, Currency: c.Currency, Status: status, Sequence: seq, GroupID: o.GroupID,
			PaymentID: paymentID, Reason: reason,
		})
	}
	var out []Event
	if accepted {
		out = append(out, ev(OrderAccepted, SeqAccepted, order.PendingPayment, o.CreatedAt, "", ""))
	}
	paidAt := orTime(o.PaidAt, o.CreatedAt)
	switch o.Status {
	case order.Paid:
		out = append(out, ev(OrderPaid, SeqPaid, order.Paid, paidAt, o.PaymentID, ""))
	case order.Refunded:
		out = append(out, ev(OrderPaid, SeqPaid, order.Paid, paidAt, o.PaymentID, ""),
			ev(OrderRefunded, SeqRefunded, order.Refunded, orTime(refundedAt, paidAt), o.PaymentID, ""))
	case order.Cancelled:
		out = append(out, ev(OrderCancelled, SeqCancelled, order.Cancelled, orTime(o.CancelledAt, o.CreatedAt), "", reason))
	}
	return out
}

// orTime is t, or def when t is zero (a record from before the field).
func orTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// groupData is a group event's data.
type groupData struct {
	GroupID    string   `json:"group_id"`
	ActivityID int64    `json:"activity_id"`
	Size       int      `json:"size"`
	Members    []string `json:"members"`
	Sequence   int64    `json:"sequence"`
}

// GroupEvent returns group.succeeded or group.failed of group g, which
// ended at at; ok is false while g is forming. A group ends once, so its
// event is its subject's only one (sequence 1).
func GroupEvent(g order.Group, at time.Time) (Event, bool) {
	t := GroupSucceeded
	switch g.Status {
	case order.Succeeded:
	case order.Failed:
		t = GroupFailed
	default:
		return Event{}, false
	}
	members := make([]string, 0, len(g.MemberOrders))
	for _, no := range g.MemberOrders {
		members = append(members, no)
	}
	slices.Sort(members) // a map's order is random: the body must not be
	return newEvent(t, g.ID, 1, g.ActivityID, at, groupData{
		GroupID: g.ID, ActivityID: g.ActivityID, Size: g.Size, Members: members, Sequence: 1,
	}), true
}

// activityData is an activity event's data.
type activityData struct {
	ActivityID int64           `json:"activity_id"`
	Name       string          `json:"name"`
	SKU        string          `json:"sku"`
	Status     activity.Status `json:"status"`
	Sequence   int64           `json:"sequence"`
}

// ActivityEvent returns the event t (activity.closed, paused, resumed,
// sold_out) of a as it is after the change, made at at. Its sequence is
// a's version: the activity's changes are serialised by its MySQL row lock,
// each with the next version, so the numbers order them.
func ActivityEvent(t Type, a activity.Activity, at time.Time) Event {
	return newEvent(t, strconv.FormatInt(a.ID, 10), a.Version, a.ID, at, activityData{
		ActivityID: a.ID, Name: a.Name, SKU: a.SKU, Status: a.Status, Sequence: a.Version,
	})
}

// paymentData is payment.flagged's data.
type paymentData struct {
	PaymentID   string       `json:"payment_id"`
	OrderNo     string       `json:"order_no"`
	ActivityID  int64        `json:"activity_id"`
	AmountCents int64        `json:"amount_cents"`
	Currency    string       `json:"currency"`
	Flag        payment.Flag `json:"flag"`
	Sequence    int64        `json:"sequence"`
}

// PaymentFlaggedEvent returns payment.flagged of p, money that paid no
// order (p.Flag says why: late, duplicate, mismatch, unknown_order), at
// at. A payment is flagged once (its flag never changes), so its event is
// its only one.
func PaymentFlaggedEvent(p payment.Payment, at time.Time) Event {
	return newEvent(PaymentFlagged, p.ID, 1, p.ActivityID, at, paymentData{
		PaymentID: p.ID, OrderNo: p.OrderNo, ActivityID: p.ActivityID, AmountCents: p.AmountCents,
		Currency: p.Currency, Flag: p.Flag, Sequence: 1,
	})
}
