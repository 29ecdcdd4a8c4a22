package mysqlstore

import (
	"context"

	"github.com/flashsale/flashsale/internal/webhook"
)

// Cursor is the dispatcher's cursor, for the external tests.
func (w *Webhooks) Cursor(ctx context.Context) (webhook.Position, error) { return w.cursor(ctx) }
