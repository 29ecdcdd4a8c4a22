package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/jsonw/jsonwtest"
	"github.com/flashsale/flashsale/internal/order"
)

// An order's events written by hand carry the very bytes json.Marshal
// wrote for them (newEvent), whatever the order's fields hold: their
// bodies are signed and sent as stored, and an event derived again must
// be the same row.
func TestOrderEvents_bodiesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 43))
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, 1 << 53}
	times := []time.Time{
		time.Unix(0, 0).UTC(), time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 6, 1, 8, 0, 0, 999_999, time.FixedZone("CST", 8*3600)),
	}
	statuses := []order.Status{order.PendingPayment, order.Paid, order.Refunded, order.Cancelled, "odd<status>"}
	s := func() string { return jsonwtest.OddStrings[r.IntN(len(jsonwtest.OddStrings))] }
	i := func() int64 { return ints[r.IntN(len(ints))] }
	tm := func() time.Time { return times[r.IntN(len(times))] }
	events := 0
	for n := range 5000 {
		o := order.Order{No: s(), ActivityID: i(), UserID: i(), Quantity: int(i()), AmountCents: i(),
			Status: statuses[r.IntN(len(statuses))], CreatedAt: tm(), PaidAt: tm(), CancelledAt: tm(),
			GroupID: s(), PaymentID: s(), CancelReason: order.CancelReason(s())}
		if r.IntN(3) == 0 {
			o.PaidAt = time.Time{}
		}
		c := OrderChange{Order: o, SKU: s(), Currency: s(), Reason: CancelReason(s())}
		for _, e := range OrderEvents(c) {
			if !json.Valid(e.Body) {
				t.Fatalf("order %d: %s is not JSON", n, e.Body)
			}
			// The same event through json.Marshal: its data from the
			// hand-written path's own inputs, rebuilt.
			want := newEvent(e.Type, e.Subject, e.Sequence, e.ActivityID, e.At, orderData{
				OrderNo: o.No, ActivityID: o.ActivityID, UserID: o.UserID, SKU: c.SKU, Quantity: o.Quantity,
				AmountCents: o.AmountCents, Currency: c.Currency, Status: dataStatus(e.Type), Sequence: e.Sequence,
				GroupID: o.GroupID, PaymentID: payID(e.Type, o.PaymentID), Reason: reasonOf(e.Type, c),
			})
			if !bytes.Equal(e.Body, want.Body) || e.ID != want.ID || !e.At.Equal(want.At) || e.Subject != want.Subject {
				t.Fatalf("order %d, %s:\n got %s %s\nwant %s %s", n, e.Type, e.ID, e.Body, want.ID, want.Body)
			}
			events++
		}
	}
	if events < 8000 {
		t.Fatalf("only %d events compared", events)
	}
}

func dataStatus(t Type) order.Status {
	switch t {
	case OrderPaid:
		return order.Paid
	case OrderRefunded:
		return order.Refunded
	case OrderCancelled:
		return order.Cancelled
	}
	return order.PendingPayment
}

func payID(t Type, id string) string {
	if t == OrderPaid || t == OrderRefunded {
		return id
	}
	return ""
}

func reasonOf(t Type, c OrderChange) CancelReason {
	if t != OrderCancelled {
		return ""
	}
	for _, r := range []CancelReason{c.Reason, c.Order.CancelReason} {
		if r != "" {
			return r
		}
	}
	return CancelUnknown
}

// go test -run '^$' -bench OrderEventBody -benchmem ./internal/webhook/
func BenchmarkOrderEventBody(b *testing.B) {
	at := time.Date(2026, 11, 29, 17, 4, 5, 123456789, time.UTC)
	d := orderData{OrderNo: "42-06H0J68TSYHN2J2MDXSS60AGDR", ActivityID: 42, UserID: 12345678, SKU: "PH-X", Quantity: 1,
		AmountCents: 990, Currency: "cny", Status: order.PendingPayment, Sequence: SeqAccepted}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = newEvent(OrderAccepted, d.OrderNo, SeqAccepted, d.ActivityID, at, d)
		}
	})
	b.Run("appendOrderBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = newOrderEvent(OrderAccepted, SeqAccepted, at, &d)
		}
	})
}

// idAsFirstWritten is ID as it was first written (strings joined, then
// encoded): the ids of events already stored were made by it, and an event
// derived again must get the same one.
func idAsFirstWritten(t Type, subject string, sequence int64) string {
	h := sha256.Sum256([]byte(string(t) + "\n" + subject + "\n" + strconv.FormatInt(sequence, 10)))
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
	return "evt_" + idEncoding.EncodeToString(b[:])
}

func TestID_unchanged(t *testing.T) {
	long := strings.Repeat("x", 200) // past ID's stack buffer
	for _, subject := range append(slices.Clone(jsonwtest.OddStrings), long, "42-06H0J68TSYHN2J2MDXSS60AGDR", "7", "pi_3Q") {
		for _, typ := range Types {
			for _, seq := range []int64{0, 1, 2, 3, -1, math.MaxInt64} {
				if got, want := ID(typ, subject, seq), idAsFirstWritten(typ, subject, seq); got != want {
					t.Fatalf("ID(%s, %q, %d) = %s, want %s", typ, subject, seq, got, want)
				}
			}
		}
	}
}
