package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/payment"
)

// The worker's record of a payment only moves forward, whatever order its
// writes arrive in (each change queues one, and asynq runs them in any
// order): a status older than the row's — pending or failed after
// succeeded, pending after canceled — changes nothing; a flag once set
// stays; a refund is one row per payment, the first refund's.
func TestPayments_olderWriteAfterANewer_changesNothing(t *testing.T) {
	ctx := context.Background()
	recs := mysqlstore.NewPayments(migrated(t))
	at := time.Now().UTC().Truncate(time.Millisecond)
	pay := func(id string, st payment.Status, flag payment.Flag, refund string, dt time.Duration) payment.Payment {
		return payment.Payment{ID: id, Provider: "simulated", OrderNo: "9-" + id, ActivityID: 9, AmountCents: 500,
			Currency: "cny", Status: st, Flag: flag, RefundID: refund, CreatedAt: at, UpdatedAt: at.Add(dt)}
	}
	for _, tc := range []struct {
		name   string
		writes []payment.Payment // in the order they arrive
		want   payment.Payment   // the record after them
	}{
		{"failed after succeeded", []payment.Payment{
			pay("pi_a", payment.Pending, "", "", 0), pay("pi_a", payment.Succeeded, "", "", 2*time.Second),
			pay("pi_a", payment.Failed, "", "", time.Second),
		}, pay("pi_a", payment.Succeeded, "", "", 2*time.Second)},
		{"pending and canceled after succeeded", []payment.Payment{
			pay("pi_b", payment.Succeeded, "", "", 2*time.Second), pay("pi_b", payment.Pending, "", "", 0),
			pay("pi_b", payment.Canceled, "", "", time.Second),
		}, pay("pi_b", payment.Succeeded, "", "", 2*time.Second)},
		{"pending after canceled", []payment.Payment{
			pay("pi_c", payment.Canceled, "", "", time.Second), pay("pi_c", payment.Pending, "", "", 0),
		}, pay("pi_c", payment.Canceled, "", "", time.Second)},
		{"late money: the unflagged write after the flagged, refunded one", []payment.Payment{
			pay("pi_d", payment.Succeeded, payment.Late, "re_1", 2*time.Second), pay("pi_d", payment.Succeeded, "", "", time.Second),
			pay("pi_d", payment.Succeeded, payment.Late, "re_2", 3*time.Second),
		}, pay("pi_d", payment.Succeeded, payment.Late, "re_1", 3*time.Second)},
	} {
		for _, w := range tc.writes {
			if err := recs.WritePayment(ctx, w); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		got, err := recs.OfOrder(ctx, tc.want.OrderNo)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d records of the order, want 1: %+v", tc.name, len(got), got)
		}
		g, w := got[0], tc.want
		sameTimes := g.CreatedAt.Equal(w.CreatedAt) && g.UpdatedAt.Equal(w.UpdatedAt)
		g.CreatedAt, g.UpdatedAt, w.CreatedAt, w.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w || !sameTimes {
			t.Errorf("%s: recorded\n%+v, want\n%+v", tc.name, got[0], tc.want)
		}
	}
}
