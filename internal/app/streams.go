package app

import (
	"context"

	"github.com/flashsale/flashsale/internal/catalog"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// acceptedEvent derives order.accepted of an order not yet in the outbox
// (accepted in Redis, not yet persisted) for its stream's first event: by
// webhook.OrderEvents, the producers' own derivation, so with the same id
// and sequence as the row the worker appends later. The SKU is the
// order's item's, or the sale's for a sale of one item.
func acceptedEvent(cat *catalog.Catalog, currency string) func(context.Context, order.Order) (webhook.Event, error) {
	return func(ctx context.Context, o order.Order) (webhook.Event, error) {
		sku := o.Item
		if sku == "" {
			a, err := cat.Activity(ctx, o.ActivityID)
			if err != nil {
				return webhook.Event{}, err
			}
			sku = a.SKU
		}
		return webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: sku, Currency: currency})[0], nil
	}
}
