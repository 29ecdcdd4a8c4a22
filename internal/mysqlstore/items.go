package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/refusal"
)

// ItemRow is a row of the activity_items table (migrations/00011).
type ItemRow struct {
	ActivityID   uint64 `gorm:"column:activity_id;primaryKey"`
	Position     int    `gorm:"column:position;primaryKey"`
	SKU          string `gorm:"column:sku"`
	Label        string `gorm:"column:label"`
	PriceCents   int64  `gorm:"column:price_cents"`
	InitialStock int    `gorm:"column:initial_stock"`
	Stock        int    `gorm:"column:stock"`
	PerUserLimit *int   `gorm:"column:per_user_limit"`
}

// TableName is the table's name.
func (ItemRow) TableName() string { return "activity_items" }

// LedgerRow is a row of the stock_ledger table (migrations/00011): one
// change of an item's stock.
type LedgerRow struct {
	ID         uint64    `gorm:"column:id;primaryKey;autoIncrement"`
	ActivityID uint64    `gorm:"column:activity_id"`
	SKU        string    `gorm:"column:sku"`
	Delta      int       `gorm:"column:delta"`
	StockAfter int       `gorm:"column:stock_after"`
	Version    int64     `gorm:"column:version"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName is the table's name.
func (LedgerRow) TableName() string { return "stock_ledger" }

// itemRows are a's items as rows. An activity in the flat form (no Items)
// has its one item's row too, so every activity made here has its items
// in the table.
func itemRows(a *activity.Activity) []ItemRow {
	items := a.ItemList()
	rows := make([]ItemRow, len(items))
	for i, it := range items {
		rows[i] = ItemRow{ActivityID: uint64(a.ID), Position: i, SKU: it.SKU, Label: it.Label, PriceCents: it.PriceCents,
			InitialStock: it.Stock, Stock: it.Stock}
		if it.PerUserLimit > 0 {
			l := it.PerUserLimit
			rows[i].PerUserLimit = &l
		}
	}
	return rows
}

// withItems fills in the items of activities as, read from tx. An
// activity with no rows (made by a release before items, while both ran)
// stays in the flat form.
func withItems(tx *gorm.DB, as []activity.Activity) error {
	if len(as) == 0 {
		return nil
	}
	ids := make([]uint64, len(as))
	for i, a := range as {
		ids[i] = uint64(a.ID)
	}
	var rows []ItemRow
	if err := tx.Where("activity_id IN ?", ids).Order("activity_id, position").Find(&rows).Error; err != nil {
		return err
	}
	byID := make(map[uint64][]activity.Item, len(as))
	for _, r := range rows {
		it := activity.Item{SKU: r.SKU, Label: r.Label, PriceCents: r.PriceCents, Stock: r.Stock}
		if r.PerUserLimit != nil {
			it.PerUserLimit = *r.PerUserLimit
		}
		byID[r.ActivityID] = append(byID[r.ActivityID], it)
	}
	for i := range as {
		if items := byID[uint64(as[i].ID)]; len(items) > 0 {
			as[i].Items = items
		}
	}
	return nil
}

// replaceItems writes a's items over those of its row (a draft's items
// change whole; their initial stock is their stock).
func replaceItems(tx *gorm.DB, a *activity.Activity) error {
	if err := tx.Where("activity_id = ?", a.ID).Delete(&ItemRow{}).Error; err != nil {
		return err
	}
	rows := itemRows(a)
	return tx.Create(&rows).Error
}

// sameItems reports whether a and b have the same items.
func sameItems(a, b []activity.Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ChangeStock adds delta units (negative: removes them) to item sku of
// activity id, in one transaction under the activity's row lock: the
// item's stock and the activity's total_stock, the next version, and a
// row of the stock ledger. check refuses a change the activity's state
// does not allow (its error aborts, as is); during, when not nil, runs
// under the lock after check with the activity as it is (before) and as
// the change leaves it (after: its next version), and its error aborts
// the change too (a removal takes the units out of
// Redis there, so no other admin change of the activity runs between
// Redis and MySQL). It returns the activity as changed and the change.
func (s *Activities) ChangeStock(ctx context.Context, id int64, sku string, delta int,
	check func(*activity.Activity) error, during func(before, after activity.Activity) error) (activity.Activity, activity.StockChange, error) {
	var out activity.Activity
	var ch activity.StockChange
	var duringErr error // during's, returned as it is
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		a, err := lockActivity(tx, id)
		if err != nil {
			return err
		}
		if err := check(&a); err != nil {
			return err
		}
		pos := -1
		items := a.ItemList()
		for i, it := range items {
			if it.SKU == sku {
				pos = i
			}
		}
		if pos < 0 {
			return refusal.OfField(activity.ErrInvalid, "item", "the activity has no item %q", sku)
		}
		next := a
		next.Items = append([]activity.Item(nil), items...)
		next.Items[pos].Stock += delta
		if next.Items[pos].Stock < 0 || next.Items[pos].Stock > activity.MaxStock {
			return refusal.OfField(activity.ErrInvalid, "add", "would leave item %q with %d units: an item's stock is 0 to %d",
				sku, next.Items[pos].Stock, activity.MaxStock)
		}
		next.Normalize()
		if next.TotalStock > activity.MaxStock {
			return refusal.OfField(activity.ErrInvalid, "add", "would leave the sale with more than %d units", activity.MaxStock)
		}
		next.UpdatedAt = now()
		next.Version = a.Version + 1
		if during != nil {
			if duringErr = during(a, next); duringErr != nil {
				return duringErr
			}
		}
		res := tx.Model(&ItemRow{}).Where("activity_id = ? AND position = ?", id, pos).
			Update("stock", gorm.Expr("stock + ?", delta))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 { // an activity from before its items' rows: they are written now
			if err := replaceItems(tx, &a); err != nil {
				return err
			}
			if err := tx.Model(&ItemRow{}).Where("activity_id = ? AND position = ?", id, pos).
				Update("stock", gorm.Expr("stock + ?", delta)).Error; err != nil {
				return err
			}
		}
		if err := tx.Model(&ActivityRow{}).Where("id = ?", id).Updates(map[string]any{
			"total_stock": next.TotalStock, "version": next.Version, "updated_at": next.UpdatedAt,
		}).Error; err != nil {
			return err
		}
		ch = activity.StockChange{SKU: sku, Delta: delta, StockAfter: next.Items[pos].Stock, Version: next.Version, At: next.UpdatedAt}
		if err := tx.Create(&LedgerRow{ActivityID: uint64(id), SKU: sku, Delta: delta, StockAfter: ch.StockAfter,
			Version: ch.Version, CreatedAt: ch.At}).Error; err != nil {
			return err
		}
		out = next
		return nil
	})
	if err != nil {
		if isDomain(err) || (duringErr != nil && errors.Is(err, duringErr)) {
			return activity.Activity{}, activity.StockChange{}, err
		}
		return activity.Activity{}, activity.StockChange{}, fmt.Errorf("%w: change stock of activity %d: %w", ErrUnavailable, id, err)
	}
	return out, ch, nil
}

// Ledger returns activity id's stock changes, oldest first.
func (s *Activities) Ledger(ctx context.Context, id int64) ([]activity.StockChange, error) {
	var rows []LedgerRow
	if err := s.db.WithContext(ctx).Where("activity_id = ?", id).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("%w: stock ledger of activity %d: %w", ErrUnavailable, id, err)
	}
	out := make([]activity.StockChange, len(rows))
	for i, r := range rows {
		out[i] = activity.StockChange{SKU: r.SKU, Delta: r.Delta, StockAfter: r.StockAfter, Version: r.Version, At: r.CreatedAt.UTC()}
	}
	return out, nil
}

// lockActivity reads activity id with its items under its row lock.
func lockActivity(tx *gorm.DB, id int64) (activity.Activity, error) {
	var row ActivityRow
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&row, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return activity.Activity{}, fmt.Errorf("%w: %d", activity.ErrNotFound, id)
	}
	if err != nil {
		return activity.Activity{}, err
	}
	as := []activity.Activity{row.toActivity()}
	if err := withItems(tx, as); err != nil {
		return activity.Activity{}, err
	}
	return as[0], nil
}

// isDomain reports whether err is the domain's (a refusal fn made), not
// MySQL's.
func isDomain(err error) bool {
	return errors.Is(err, activity.ErrNotFound) || errors.Is(err, activity.ErrInvalid) || errors.Is(err, activity.ErrConflict)
}
