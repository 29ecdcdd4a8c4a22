package mysqlstore

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/webhook"
)

// orderEvents derives the events of a batch of orders being written in tx
// (docs/webhooks.md, option (b)): every event of each order up to the state
// its record holds but its order.accepted, which is the order's row
// (webhook.LaterOrderEvents: all of them every time, the outbox keeps one
// row an id, so nothing needs to remember what was produced before), and
// activity.sold_out of an order that took its flash
// sale's last unit (order.Order.SoldOutVersion, set by the accept in
// Redis). A stale write (a fence below the row's) derives a prefix of
// what the row's own write derived: nothing new.
//
// It reads, in tx, the activities it needs: the SKU of orders that carry
// no item (made before items: their sale's one item) and the name and SKU
// a sold_out reports. Orders carrying their item need no read.
func (s *Orders) orderEvents(tx *gorm.DB, batch []*orderWrite) ([]webhook.Event, error) {
	var need []int64
	seen := map[int64]bool{}
	for _, w := range batch {
		if (w.o.Item == "" || w.o.SoldOutVersion > 0) && !seen[w.o.ActivityID] {
			seen[w.o.ActivityID] = true
			need = append(need, w.o.ActivityID)
		}
	}
	acts := map[int64]ActivityRow{}
	if len(need) > 0 {
		var rows []ActivityRow
		if err := tx.Select("id", "name", "sku").Where("id IN ?", need).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read the activities of orders' events: %w", err)
		}
		for _, r := range rows {
			acts[int64(r.ID)] = r
		}
	}
	events := make([]webhook.Event, 0, len(batch)/4)
	for _, w := range batch {
		o := w.o
		sku := o.Item
		if sku == "" {
			sku = acts[o.ActivityID].SKU
		}
		events = append(events, webhook.LaterOrderEvents(webhook.OrderChange{Order: o, SKU: sku, Currency: s.opts.Currency})...)
		if o.SoldOutVersion > 0 {
			a := acts[o.ActivityID]
			// The sale was on sale when the accept took its last unit
			// (nothing else is accepted), at the version the record
			// carries: a restock (a new version) then a second sell-out is
			// a second event; a unit given back and sold again at the same
			// version is the same event, the same id.
			events = append(events, webhook.ActivityEvent(webhook.ActivitySoldOut, activity.Activity{
				ID: o.ActivityID, Name: a.Name, SKU: a.SKU, Status: activity.Published, Version: o.SoldOutVersion,
			}, o.CreatedAt))
		}
	}
	return events, nil
}
