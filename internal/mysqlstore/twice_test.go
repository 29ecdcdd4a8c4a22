package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
)

// An order written twice in one batch (its sync ran twice at once) is one
// row, at its latest state, with each of its events once: on MariaDB, and
// on go-mysql-server (embedded memory mode), which wrote a second row of
// an order already there that one statement updated twice.
func TestOrders_sameOrderTwiceInABatch_oneRow(t *testing.T) {
	onBothServers(t, func(t *testing.T, db *gorm.DB) {
		s := mysqlstore.NewOrders(db)
		t.Cleanup(s.Close)
		ctx := context.Background()
		at := time.Now().UTC().Truncate(time.Second)
		pending := func() order.Order {
			return order.Order{No: order.NewNo(42), ActivityID: 42, UserID: 7, Quantity: 1, PriceCents: 5, AmountCents: 5,
				Status: order.PendingPayment, Fence: 1, CreatedAt: at, Item: "X"}
		}
		paid := func(o order.Order) order.Order {
			o.Status, o.Fence, o.PaidAt, o.PaymentID = order.Paid, 2, at.Add(time.Second), "pi_1"
			return o
		}
		// Orders already there, so that the batch updates them.
		var there []order.Order
		for range 12 {
			there = append(there, pending())
		}
		if err := s.WriteMany(ctx, there); err != nil {
			t.Fatal(err)
		}
		fresh := pending()
		freshPaid := paid(fresh)
		// One batch: a new order then its paid state; an order there,
		// paid, twice; another there, the same state twice around
		// others; and the paid state before the older one.
		batch := []order.Order{fresh, paid(there[3]), freshPaid, there[5], paid(there[3]), there[9], there[5],
			paid(there[7]), there[7]}
		if err := s.WriteMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{fresh.No: "paid", there[3].No: "paid", there[5].No: "pending_payment", there[7].No: "paid"}
		for no, status := range want {
			var rows []struct{ Status string }
			if err := db.Raw("SELECT status FROM orders WHERE order_no = ?", no).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Status != status {
				t.Errorf("order %s: rows %v, want one %s", no, rows, status)
			}
			var events []struct{ Type string }
			if err := db.Raw("SELECT type FROM webhook_events WHERE subject = ?", no).Scan(&events).Error; err != nil {
				t.Fatal(err)
			}
			if wantEvents := map[string]int{"paid": 1, "pending_payment": 0}[status]; len(events) != wantEvents {
				t.Errorf("order %s: events %v, want %d", no, events, wantEvents)
			}
		}
		var n, distinct int64
		db.Raw("SELECT COUNT(*) FROM orders").Scan(&n)
		db.Raw("SELECT COUNT(DISTINCT order_no) FROM orders").Scan(&distinct)
		if n != 13 || distinct != 13 {
			t.Fatalf("%d rows, %d orders; want 13 of each", n, distinct)
		}
	})
}
