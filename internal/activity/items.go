package activity

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Item is one thing a sale sells: a variant (a colour, a size) with its
// own stock and price. A shopper orders an item by its SKU; the sale's
// per-user limit caps their units across its items, and an item's own
// PerUserLimit, when set, caps that item.
type Item struct {
	SKU        string
	Label      string // what shoppers read ("Blue, 128 GB"); optional
	PriceCents int64
	// Stock is the units the sale has of the item: what it was created
	// with, plus what restocks added, less what they removed (the stock
	// ledger in MySQL says when and by which change).
	Stock int
	// PerUserLimit is the units of this item one user may hold; 0: only
	// the sale's limit applies.
	PerUserLimit int
}

// Limits of a sale's items.
const (
	MaxItems    = 50
	MaxLabelLen = 100
)

// ValidSKU reports whether sku is a valid SKU: 1 to MaxSKULen letters,
// digits, '.', '_' or '-', a letter or digit first (what Validate asks of
// an activity's; the order path checks an item named with it, without a
// regular expression).
func ValidSKU(sku string) bool {
	if sku == "" || len(sku) > MaxSKULen || !alnum(sku[0]) {
		return false
	}
	for i := 1; i < len(sku); i++ {
		if c := sku[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// ItemList is a's items: Items, or for an activity in the flat form (no
// Items) its one item, SKU at PriceCents with TotalStock units.
func (a *Activity) ItemList() []Item {
	if len(a.Items) > 0 {
		return a.Items
	}
	return []Item{{SKU: a.SKU, PriceCents: a.PriceCents, Stock: a.TotalStock}}
}

// Item returns a's item sku, and false when a has none of that SKU.
func (a *Activity) Item(sku string) (Item, bool) {
	for _, it := range a.ItemList() {
		if it.SKU == sku {
			return it, true
		}
	}
	return Item{}, false
}

// Normalize makes an activity with Items carry their figures in the flat
// fields too — SKU and PriceCents the first item's, TotalStock the sum of
// their stock — which is what the record's columns, the listing and every
// reader of the flat form see. An activity in the flat form is left as
// it is.
func (a *Activity) Normalize() {
	if a.WaitingRoom && a.AdmissionTTL == 0 {
		a.AdmissionTTL = DefaultAdmissionTTL
	}
	if len(a.Items) == 0 {
		return
	}
	a.SKU, a.PriceCents, a.TotalStock = a.Items[0].SKU, a.Items[0].PriceCents, itemsStock(a.Items)
}

// itemsStock is the sum of items' stock, saturating at MaxStock+1 (an
// invalid sum, whatever the items, never wraps into a valid one).
func itemsStock(items []Item) int {
	sum := 0
	for _, it := range items {
		if it.Stock > 0 {
			sum += min(it.Stock, MaxStock+1)
		}
		if sum > MaxStock {
			return MaxStock + 1
		}
	}
	return sum
}

// mirrorsFlat reports whether a's one item is its flat fields (the flat
// form, normalised): then the flat fields' names are the ones a client
// used, and the errors name them.
func (a *Activity) mirrorsFlat() bool {
	if len(a.Items) != 1 {
		return false
	}
	it := a.Items[0]
	return it.SKU == a.SKU && it.PriceCents == a.PriceCents && it.Stock == a.TotalStock
}

// validateItems checks the items, or the flat fields of an activity in
// the flat form, naming the field at fault as the client sent it
// ("total_stock", "items[2].stock").
func (a *Activity) validateItems() error {
	if a.Items != nil && len(a.Items) == 0 {
		return invalid("items", "must be 1 to %d items, not 0", MaxItems)
	}
	if len(a.Items) == 0 || a.mirrorsFlat() {
		if err := validateFlat(a.SKU, a.PriceCents, a.TotalStock); err != nil {
			return err
		}
		if len(a.Items) == 1 {
			return a.Items[0].validateOwn("items[0].")
		}
		return nil
	}
	if len(a.Items) > MaxItems {
		return invalid("items", "must be 1 to %d items, not %d", MaxItems, len(a.Items))
	}
	seen := make(map[string]int, len(a.Items))
	for i, it := range a.Items {
		at := fmt.Sprintf("items[%d].", i)
		switch {
		case it.SKU == "":
			return invalid(at+"sku", "is required")
		case len(it.SKU) > MaxSKULen || !skuPattern.MatchString(it.SKU):
			return invalid(at+"sku", "must be 1-%d letters, digits, '.', '_' or '-'", MaxSKULen)
		}
		if j, ok := seen[it.SKU]; ok {
			return invalid(at+"sku", "%q is items[%d]'s already: each item has its own sku", it.SKU, j)
		}
		seen[it.SKU] = i
		if it.PriceCents <= 0 || it.PriceCents > MaxPriceCents {
			return invalid(at+"price_cents", "must be between 1 and %d", int64(MaxPriceCents))
		}
		if it.Stock <= 0 || it.Stock > MaxStock {
			return invalid(at+"stock", "must be between 1 and %d", MaxStock)
		}
		if err := it.validateOwn(at); err != nil {
			return err
		}
	}
	sum := itemsStock(a.Items)
	if sum > MaxStock {
		return invalid("items", "hold more than %d units together", MaxStock)
	}
	if (a.SKU != "" && a.SKU != a.Items[0].SKU) || (a.PriceCents != 0 && a.PriceCents != a.Items[0].PriceCents) ||
		(a.TotalStock != 0 && a.TotalStock != sum) {
		return invalid("items", "give items, or sku, price_cents and total_stock: a sale with items has the first item's sku and price and their total stock")
	}
	return nil
}

// validateFlat checks the flat form's one item.
func validateFlat(sku string, price int64, stock int) error {
	switch {
	case sku == "":
		return invalid("sku", "is required")
	case len(sku) > MaxSKULen || !skuPattern.MatchString(sku):
		return invalid("sku", "must be 1-%d letters, digits, '.', '_' or '-'", MaxSKULen)
	}
	if price <= 0 || price > MaxPriceCents {
		return invalid("price_cents", "must be between 1 and %d", int64(MaxPriceCents))
	}
	if stock <= 0 || stock > MaxStock {
		return invalid("total_stock", "must be between 1 and %d", MaxStock)
	}
	return nil
}

// validateOwn checks what an item has beyond the flat form: its label and
// its own limit; at prefixes the fields' names.
func (it Item) validateOwn(at string) error {
	switch {
	case !utf8.ValidString(it.Label):
		return invalid(at+"label", "is not valid UTF-8")
	case utf8.RuneCountInString(strings.TrimSpace(it.Label)) > MaxLabelLen:
		return invalid(at+"label", "is longer than %d characters", MaxLabelLen)
	case it.PerUserLimit < 0 || it.PerUserLimit > MaxPerUserLimit:
		return invalid(at+"per_user_limit", "must be between 1 and %d, or left out for the sale's limit alone", MaxPerUserLimit)
	}
	return nil
}

// cloneItems is a copy of items (nil stays nil), so a change made to a
// copy of an activity does not reach the original's items.
func cloneItems(items []Item) []Item {
	if items == nil {
		return nil
	}
	return append([]Item(nil), items...)
}

// StockChange is one change of an item's stock by an admin (a restock,
// or a removal of unsold units), as the stock ledger records it.
type StockChange struct {
	SKU        string
	Delta      int // units added; negative: removed
	StockAfter int // the item's stock once it applied
	Version    int64
	At         time.Time
}

// CheckStockChange checks the units an admin adds to an item (negative:
// removes), add, on its own: not zero, and within MaxStock either way.
func CheckStockChange(add int) error {
	if add == 0 || add < -MaxStock || add > MaxStock {
		return invalid("add", "must be a whole number from -%d to %d, not 0: the units to add (negative: unsold units to remove)", MaxStock, MaxStock)
	}
	return nil
}
