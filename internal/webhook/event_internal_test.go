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

// An order's event written by hand carries the very bytes, id and time
// newEvent (json.Marshal) gives it, whatever its data holds: bodies are
// signed and sent as stored, and an event derived again must be the same
// row. The data drawn here covers every member, the optional ones empty
// or not, and strings with every escape.
func TestOrderEvents_bodiesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 43))
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, 1 << 53}
	times := []time.Time{
		time.Unix(0, 0).UTC(), time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 6, 1, 8, 0, 0, 999_999, time.FixedZone("CST", 8*3600)),
	}
	types := []Type{OrderAccepted, OrderPaid, OrderCancelled, OrderRefunded}
	statuses := []order.Status{order.PendingPayment, order.Paid, order.Refunded, order.Cancelled, "odd<status>"}
	s := func() string { return jsonwtest.OddStrings[r.IntN(len(jsonwtest.OddStrings))] }
	i := func() int64 { return ints[r.IntN(len(ints))] }
	for n := range 20000 {
		d := orderData{OrderNo: s(), ActivityID: i(), UserID: i(), SKU: s(), Quantity: int(i()), AmountCents: i(),
			Currency: s(), Status: statuses[r.IntN(len(statuses))], Sequence: i(), GroupID: s(), PaymentID: s(),
			Reason: CancelReason(s())}
		typ, at := types[r.IntN(len(types))], times[r.IntN(len(times))]
		got := newOrderEvent(typ, d.Sequence, at, &d)
		want := newEvent(typ, d.OrderNo, d.Sequence, d.ActivityID, at, d)
		if !bytes.Equal(got.Body, want.Body) || got.ID != want.ID || !got.At.Equal(want.At) || got.Subject != want.Subject ||
			got.ActivityID != want.ActivityID || got.Type != want.Type || got.Sequence != want.Sequence {
			t.Fatalf("event %d:\n got %+v %s\nwant %+v %s", n, got, got.Body, want, want.Body)
		}
	}
}

// go test -run '^$' -bench OrderEventBody -benchmem ./internal/webhook/:
// an order.accepted made as before issue 43's cut (json.Marshal,
// time.Format, the id hashed from joined strings) and as now.
func BenchmarkOrderEventBody(b *testing.B) {
	at := time.Date(2026, 11, 29, 17, 4, 5, 123456789, time.UTC)
	d := orderData{OrderNo: "42-06H0J68TSYHN2J2MDXSS60AGDR", ActivityID: 42, UserID: 12345678, SKU: "PH-X", Quantity: 1,
		AmountCents: 990, Currency: "cny", Status: order.PendingPayment, Sequence: SeqAccepted}
	b.Run("json.Marshal (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			at := at.UTC().Truncate(time.Millisecond)
			body, _ := json.Marshal(body{Type: OrderAccepted, Timestamp: at.Format(timeFormat), Data: d})
			_ = Event{ID: idAsFirstWritten(OrderAccepted, d.OrderNo, SeqAccepted), Type: OrderAccepted, Subject: d.OrderNo,
				Sequence: SeqAccepted, ActivityID: d.ActivityID, At: at, Body: body}
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
