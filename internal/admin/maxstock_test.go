package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
)

// With a MaxStock (embedded mode's in-memory servers), a sale of more units
// is refused at creation, and a draft changed to more, as the total_stock
// field's error saying why; one of MaxStock units is created.
func TestCreate_overMaxStock_refusedWithTheReason(t *testing.T) {
	e := newEnv(t)
	adm := admin.New(e.acts, e.shop.Stock, e.mysql, e.shop.Store, admin.Config{MaxStock: 2000, MaxStockReason: "the servers run in memory"})
	ctx := context.Background()
	sale := func(units int) activity.Activity {
		return activity.Activity{Type: activity.Seckill, Name: "s", SKU: "S", PriceCents: 100, TotalStock: units, PerUserLimit: 1,
			StartsAt: time.Now().Add(time.Hour), EndsAt: time.Now().Add(2 * time.Hour)}
	}
	refused := func(err error) {
		t.Helper()
		var fe *activity.FieldError
		if !errors.As(err, &fe) || fe.Field != "total_stock" || !strings.Contains(fe.Message, "must be at most 2000 here: the servers run in memory") {
			t.Fatalf("%v: want total_stock's error with the reason", err)
		}
	}
	_, err := adm.Create(ctx, sale(2001))
	refused(err)
	a, err := adm.Create(ctx, sale(2000))
	if err != nil {
		t.Fatal(err)
	}
	more := 100_000
	_, err = adm.Update(ctx, a.ID, activity.Patch{TotalStock: &more})
	refused(err)
	if got, _ := adm.Get(ctx, a.ID); got.TotalStock != 2000 {
		t.Fatalf("after a refused update: %d units, want 2000", got.TotalStock)
	}
}
