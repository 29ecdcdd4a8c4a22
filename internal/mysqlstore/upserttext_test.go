package mysqlstore

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/order"
)

// upsertText writes a row's values as the driver's interpolation of
// upsertArgs does: numbers, quoted strings, NULL for the empty ones and
// the unset times, times in UTC to the nanosecond without trailing zeros,
// the row's event_seq from base.
func TestUpsertText_aRow(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 34, 56, 789012000, time.FixedZone("CST", 8*3600))
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	b := []*orderWrite{
		{o: order.Order{No: "42-A", ActivityID: 42, UserID: 7, Quantity: 2, PriceCents: 990, AmountCents: 1980,
			Status: order.Paid, Fence: 2, CreatedAt: at, PaidAt: at.Add(time.Second), PaymentID: "pi_1", Item: "茶"}},
		{o: order.Order{No: "42-B", ActivityID: 42, UserID: 8, Quantity: 1, Status: order.Cancelled, Fence: 3,
			CreatedAt: at.Truncate(time.Second), CancelledAt: at, CancelReason: order.CancelTimeout, GroupID: "g"}},
	}
	got := upsertText(b, now, 100)
	want := upsertHead +
		"('42-A',42,7,2,990,1980,'paid',2,'2026-11-30 04:34:56.789012','2026-11-30 04:34:57.789012',NULL,'2026-11-30 05:00:00',NULL,'pi_1','茶',NULL,101)," +
		"('42-B',42,8,1,0,0,'cancelled',3,'2026-11-30 04:34:56',NULL,'2026-11-30 04:34:56.789012','2026-11-30 05:00:00','g',NULL,NULL,'timeout',102)" +
		upsertTail
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Count(upsert(2), "?") != 2*upsertCols {
		t.Fatalf("upsert(2) has %d placeholders, want %d", strings.Count(upsert(2), "?"), 2*upsertCols)
	}
}

// A string with a quote, a backslash or a control byte is no literal as it
// is: its batch goes as arguments.
func TestLiteralsFit(t *testing.T) {
	for sku, fit := range map[string]bool{"": true, "LOAD-1": true, "茶-红 500g": true, `say "hi"`: true,
		"it's": false, `a\b`: false, "a\nb": false, "a\x00": false} {
		b := []*orderWrite{{o: order.Order{No: "1-A", Status: order.PendingPayment}}, {o: order.Order{No: "1-B", Item: sku}}}
		if got := literalsFit(b); got != fit {
			t.Errorf("SKU %q: fits %v, want %v", sku, got, fit)
		}
	}
}
