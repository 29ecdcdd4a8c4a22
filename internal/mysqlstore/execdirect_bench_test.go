package mysqlstore

import (
	"testing"
	"time"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/flashsale/flashsale/internal/order"
)

// BenchmarkExecDirect: what gorm's Exec adds before the driver, for the
// worker's statement of 500 orders (go test -run '^$' -bench ExecDirect
// -benchmem ./internal/mysqlstore/): gorm building it (a dry run, which
// stops where the driver would start) against execDirect, which adds
// nothing. Reported per order. No server: the dry run sends nothing.
func BenchmarkExecDirect(b *testing.B) {
	db, err := gorm.Open(mysql.New(mysql.Config{DSN: "root@tcp(127.0.0.1:1)/x", SkipInitializeWithVersion: true}),
		&gorm.Config{DryRun: true, DisableAutomaticPing: true, Logger: logger.Discard})
	if err != nil {
		b.Fatal(err)
	}
	const n = 500
	now := time.Now()
	var args []any
	for i := range n {
		o := order.Order{No: order.NewNo(7), ActivityID: 7, UserID: int64(1e7 + i), Quantity: 1,
			PriceCents: 990, AmountCents: 990, Status: order.PendingPayment, Fence: 1, CreatedAt: now}
		args = append(args, o.No, o.ActivityID, o.UserID, o.Quantity, o.PriceCents, o.AmountCents, string(o.Status),
			o.Fence, o.CreatedAt.UTC(), nullable(o.PaidAt), nullable(o.CancelledAt), now, nonEmpty(o.GroupID),
			nonEmpty(o.PaymentID), nonEmpty(o.Item), nonEmpty(string(o.CancelReason)))
	}
	q := upsert(n)
	b.Run("gorm Exec (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := db.Exec(q, args...).Error; err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/order")
	})
}
