// Package webhook is the order events a shop's other systems are told of
// and their delivery as signed webhooks (docs/webhooks.md): the event types
// and their bodies, each event's stable id and sequence number; the
// endpoints that subscribe to them and their secrets; the retry schedule;
// the signing (the Standard Webhooks scheme, by its own library); the guard
// that keeps deliveries off private addresses; and the rules of one
// delivery attempt and of turning the outbox into deliveries.
//
// Like internal/order it imports no adapter: the outbox, the endpoints and
// the delivery log are MySQL's (internal/mysqlstore), the tasks asynq's
// (internal/tasks), behind the small interfaces in ports.go.
package webhook

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/jsonw"
	"github.com/flashsale/flashsale/internal/order"
)

// Type is an event's type, as receivers see it in the body's "type".
type Type string

// The event types (issue 41). Never rename one: receivers switch on them.
const (
	OrderAccepted    Type = "order.accepted"
	OrderPaid        Type = "order.paid"
	OrderCancelled   Type = "order.cancelled"
	OrderRefunded    Type = "order.refunded"
	GroupSucceeded   Type = "group.succeeded"
	GroupFailed      Type = "group.failed"
	ActivitySoldOut  Type = "activity.sold_out"
	ActivityPaused   Type = "activity.paused"
	ActivityResumed  Type = "activity.resumed"
	ActivityClosed   Type = "activity.closed"
	PaymentFlagged   Type = "payment.flagged"
	allTypesWildcard      = "*"
)

// Types lists every event type, in the order the documentation gives them.
var Types = []Type{OrderAccepted, OrderPaid, OrderCancelled, OrderRefunded, GroupSucceeded, GroupFailed,
	ActivitySoldOut, ActivityPaused, ActivityResumed, ActivityClosed, PaymentFlagged}

// Known reports whether t is one of Types.
func Known(t Type) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}

// Event is one thing that happened, as it is stored in the outbox and
// sent: its id, type, subject (the order number, group id, activity id or
// payment id it is about), the subject's sequence number, when it happened,
// the activity it belongs to, and the body that is sent, rendered once.
type Event struct {
	ID         string
	Type       Type
	Subject    string
	Sequence   int64
	ActivityID int64
	At         time.Time
	// Body is the Standard Webhooks body, {"type","timestamp","data"}:
	// every attempt sends these bytes. Never changed once rendered: the
	// outbox's insert reads it as a string without a copy.
	Body []byte
}

// idEncoding is the order numbers' alphabet (Crockford's base32).
var idEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// ID is the event id of the sequence'th event of type t about subject:
// "evt_" and 26 characters of base32 of 16 bytes. The same event derived
// twice — a sync run again, the reconciler's write — has the same id, so a
// receiver dedups on it (the outbox keeps one row by type, subject and
// sequence: migrations/00017).
//
// The bytes are SHA-256(t, subject, sequence), and for an order's or a
// group's event the first 6 of them are the milliseconds its number begins
// with (order.NoTime), the hash's first 10 after: ids of later orders sort
// later, so the outbox's key on id takes each insert near its end, as it
// takes seq's, instead of at a random place of its tree (4.5 µs of an
// event's 45 in MariaDB, with the tree in memory: docs/benchmarks.md). Events of
// other subjects (a sale's, a payment's) are the hash's 16 bytes; so are
// those of orders numbered before order numbers carried their time.
func ID(t Type, subject string, sequence int64) string {
	var in [128]byte // on the stack for the usual subject: no allocation
	h := sha256.Sum256(strconv.AppendInt(append(append(append(append(in[:0], t...), '\n'), subject...), '\n'), sequence, 10))
	var b [16]byte
	if ms, ok := order.NoTime(subject); ok {
		for i := 5; i >= 0; i-- {
			b[i] = byte(ms)
			ms >>= 8
		}
		copy(b[6:], h[:10])
	} else {
		copy(b[:], h[:16])
	}
	var out [4 + 26]byte
	copy(out[:], "evt_")
	idEncoding.Encode(out[4:], b[:])
	return string(out[:])
}

// IDTime returns the milliseconds an order's or a group's event id
// begins with (ID: its number's), and false for a string that is not an
// id of ID's form. An id of another subject's event gives a time too, of
// no meaning: the caller looks the event up by it and finds none.
func IDTime(id string) (ms uint64, ok bool) {
	if len(id) != 4+26 || id[:4] != "evt_" {
		return 0, false
	}
	var b [16]byte
	if n, err := idEncoding.Decode(b[:], []byte(id[4:])); err != nil || n != 16 {
		return 0, false
	}
	for i := 0; i < 6; i++ {
		ms = ms<<8 | uint64(b[i])
	}
	return ms, true
}

// body is the Standard Webhooks body.
type body struct {
	Type      Type   `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// timeFormat is the body's timestamp: RFC 3339 in UTC, to the millisecond
// (the order records' resolution).
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// newEvent renders an event whose data is data (which carries sequence
// itself, for receivers).
func newEvent(t Type, subject string, sequence, activityID int64, at time.Time, data any) Event {
	at = at.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(body{Type: t, Timestamp: at.Format(timeFormat), Data: data})
	if err != nil {
		panic("webhook: an event's data does not marshal: " + err.Error()) // the data types are ours
	}
	return Event{ID: ID(t, subject, sequence), Type: t, Subject: subject, Sequence: sequence, ActivityID: activityID, At: at, Body: b}
}

// newOrderEvent is newEvent of an order's event, its body written by hand
// (appendOrderBody): the same bytes as newEvent's
// (TestOrderEvents_bodiesAsEncodingJSON). Why (issue 43): the worker
// renders an order.accepted for every order it records, and newEvent's
// json.Marshal and time.Format were a tenth of its CPU at a launch
// (BenchmarkOrderEventBody).
func newOrderEvent(t Type, sequence int64, at time.Time, d *orderData) Event {
	at = at.UTC().Truncate(time.Millisecond)
	b := appendOrderBody(make([]byte, 0, 320), t, at, d)
	return Event{ID: ID(t, d.OrderNo, sequence), Type: t, Subject: d.OrderNo, Sequence: sequence, ActivityID: d.ActivityID, At: at, Body: b}
}

// appendOrderBody appends body{t, at, d} as encoding/json marshals it,
// at in UTC to the millisecond.
func appendOrderBody(b []byte, t Type, at time.Time, d *orderData) []byte {
	b = append(b, `{"type":`...)
	b = jsonw.AppendString(b, string(t))
	b = append(b, `,"timestamp":"`...)
	b = jsonw.AppendUTCMillis(b, at)
	b = append(b, `","data":{"order_no":`...)
	b = jsonw.AppendString(b, d.OrderNo)
	b = append(b, `,"activity_id":`...)
	b = strconv.AppendInt(b, d.ActivityID, 10)
	b = append(b, `,"user_id":`...)
	b = strconv.AppendInt(b, d.UserID, 10)
	b = append(b, `,"sku":`...)
	b = jsonw.AppendString(b, d.SKU)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, int64(d.Quantity), 10)
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, d.AmountCents, 10)
	b = append(b, `,"currency":`...)
	b = jsonw.AppendString(b, d.Currency)
	b = append(b, `,"status":`...)
	b = jsonw.AppendString(b, string(d.Status))
	b = append(b, `,"sequence":`...)
	b = strconv.AppendInt(b, d.Sequence, 10)
	if d.GroupID != "" {
		b = append(b, `,"group_id":`...)
		b = jsonw.AppendString(b, d.GroupID)
	}
	if d.PaymentID != "" {
		b = append(b, `,"payment_id":`...)
		b = jsonw.AppendString(b, d.PaymentID)
	}
	if d.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonw.AppendString(b, string(d.Reason))
	}
	return append(b, "}}"...)
}
