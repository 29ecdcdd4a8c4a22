package mysqlstore

import (
	"context"

	"github.com/flashsale/flashsale/internal/webhook"
)

// Cursor is the dispatcher's cursor, for the external tests.
func (w *Webhooks) Cursor(ctx context.Context) (webhook.Position, error) { return w.cursor(ctx) }

// BetweenReads sets what runs between the outbox's two reads (of
// webhook_events, then of the orders), for the external tests.
func (w *Webhooks) BetweenReads(fn func()) { w.betweenReads = fn }

// UpsertWithArgs sends s's batches' values as the driver's arguments, as
// before upsertText, for the external tests and the bench.
func (s *Orders) UpsertWithArgs() { s.withArgs = true }
