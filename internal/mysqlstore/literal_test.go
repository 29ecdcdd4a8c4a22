package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
)

// The orders' upsert with its values written into its text (upsertText)
// records every column as the driver's arguments did: the same orders
// written both ways, on MariaDB and on go-mysql-server, read back alike —
// times to the microsecond, NULLs, a SKU in Chinese, a SKU the text
// cannot hold as it is (a quote, a backslash: its batch goes as
// arguments), and a change of status written over a row.
func TestOrders_valuesInTheText_recordedAsArguments(t *testing.T) {
	onBothServers(t, func(t *testing.T, db *gorm.DB) {
		text := mysqlstore.NewOrders(db)
		t.Cleanup(text.Close)
		args := mysqlstore.NewOrders(db)
		args.UpsertWithArgs()
		t.Cleanup(args.Close)
		ctx := context.Background()
		at := time.Date(2026, 11, 30, 12, 34, 56, 789012000, time.UTC)
		variants := []func(*order.Order){
			func(o *order.Order) {},
			func(o *order.Order) {
				o.Status, o.Fence, o.PaidAt, o.PaymentID = order.Paid, 2, at.Add(90*time.Second), "pi_3Q"
			},
			func(o *order.Order) {
				o.Status, o.Fence, o.CancelledAt, o.CancelReason = order.Cancelled, 3, at.Add(time.Hour), order.CancelTimeout
			},
			func(o *order.Order) { o.GroupID, o.Item = "g-01J", "茶-红-500g" },
			func(o *order.Order) { o.Item = `it's a \ "SKU"` },
			func(o *order.Order) { o.CreatedAt = at.Truncate(time.Second) },
		}
		var nos [2][]string
		for way, s := range []*mysqlstore.Orders{text, args} {
			var batch []order.Order
			for i, v := range variants {
				o := order.Order{No: order.NewNo(42), ActivityID: 42, UserID: int64(100*way + i), Quantity: 2, PriceCents: 990,
					AmountCents: 1980, Status: order.PendingPayment, Fence: 1, CreatedAt: at, Item: "X"}
				v(&o)
				batch = append(batch, o)
				nos[way] = append(nos[way], o.No)
			}
			// The SKU the text cannot hold alone: the others' batch goes
			// as text.
			odd := batch[4]
			if err := s.WriteMany(ctx, append(batch[:4:4], batch[5:]...)); err != nil {
				t.Fatal(err)
			}
			if err := s.Write(ctx, odd); err != nil {
				t.Fatal(err)
			}
			// A change written over the first row.
			paid := batch[0]
			paid.Status, paid.Fence, paid.PaidAt, paid.PaymentID = order.Paid, 2, at.Add(time.Minute), "pi_9"
			if err := s.Write(ctx, paid); err != nil {
				t.Fatal(err)
			}
		}
		row := func(no string) string {
			var r struct {
				UserID                                    int64
				Quantity                                  int
				PriceCents, AmountCents, Fence            int64
				Status                                    string
				CreatedAt                                 time.Time
				PaidAt, CancelledAt                       *time.Time
				GroupID, PaymentID, ItemSku, CancelReason *string
				EventSeq                                  *uint64
			}
			if err := db.Raw("SELECT user_id, quantity, price_cents, amount_cents, fence, status, created_at, paid_at, cancelled_at, "+
				"group_id, payment_id, item_sku, cancel_reason, event_seq FROM orders WHERE order_no = ?", no).Scan(&r).Error; err != nil {
				t.Fatal(err)
			}
			str := func(p *string) string {
				if p == nil {
					return "NULL"
				}
				return *p
			}
			tm := func(p *time.Time) string {
				if p == nil {
					return "NULL"
				}
				return p.UTC().Format(time.RFC3339Nano)
			}
			if r.EventSeq == nil {
				t.Errorf("order %s: no event_seq", no)
			}
			return fmt.Sprintf("user %d qty %d price %d amount %d fence %d %s created %s paid %s cancelled %s group %s payment %s item %s reason %s",
				r.UserID%100, r.Quantity, r.PriceCents, r.AmountCents, r.Fence, r.Status, r.CreatedAt.UTC().Format(time.RFC3339Nano),
				tm(r.PaidAt), tm(r.CancelledAt), str(r.GroupID), str(r.PaymentID), str(r.ItemSku), str(r.CancelReason))
		}
		for i := range variants {
			byText, byArgs := row(nos[0][i]), row(nos[1][i])
			if byText != byArgs {
				t.Errorf("variant %d:\n text      %s\n arguments %s", i, byText, byArgs)
			}
			t.Logf("variant %d: %s", i, byText)
		}
	})
}
