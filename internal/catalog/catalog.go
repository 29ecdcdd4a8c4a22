// Package catalog is what shoppers may see of activities: a published or
// closed activity's public face with its live stock. Drafts are not
// public. The record is cached for a moment, since the public view is what
// a crowd refreshes before a sale starts and MySQL need not answer each
// time — an unknown id too, or anyone could make MySQL answer for each
// made-up id; the stock is read live.
package catalog

import (
	"context"
	"errors"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/flashsale/flashsale/internal/activity"
)

// Records reads activity records (mysqlstore.Activities).
type Records interface {
	Get(ctx context.Context, id int64) (activity.Activity, error)
}

// Stock reads the units an activity has left, in all and item by item
// (stock.Keeper).
type Stock interface {
	ItemsLeft(ctx context.Context, a activity.Activity) (int64, map[string]int64, error)
}

// Config tunes the Catalog. The zero value gives the defaults in the comments.
type Config struct {
	// CacheTTL is how long an activity's record is served from memory. Default 1s.
	CacheTTL time.Duration
	// CacheSize bounds the activity records kept, the least recently used
	// going first. Default 10,000.
	CacheSize int
	// MissingSize bounds the unknown ids remembered, the least recently
	// used going first. They are kept apart from the records, so a flood of
	// made-up ids pushes out only other made-up ids. Default 10,000.
	MissingSize int
}

// Catalog serves the public view of activities.
type Catalog struct {
	records Records
	stock   Stock
	cfg     Config

	// known holds records; missing, ids with no record: remembered too, or
	// every unknown id would reach MySQL. Until 2026-11-24 both shared one
	// map that was emptied when full, so 10,000 made-up ids also threw away
	// the sale a crowd was refreshing.
	known   *lru.Cache[int64, cached]
	missing *lru.Cache[int64, time.Time] // when the id was found missing
}

type cached struct {
	a  activity.Activity
	at time.Time
}

// New returns a catalog.
func New(records Records, stock Stock, cfg Config) *Catalog {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10_000
	}
	if cfg.MissingSize <= 0 {
		cfg.MissingSize = 10_000
	}
	known, _ := lru.New[int64, cached](cfg.CacheSize)        // only a size below 1 is an error
	missing, _ := lru.New[int64, time.Time](cfg.MissingSize) // likewise
	return &Catalog{records: records, stock: stock, cfg: cfg, known: known, missing: missing}
}

// View is an activity as the public sees it.
type View struct {
	activity.Activity
	StockRemaining int64
	// Items are its items with their units left, in the activity's order.
	Items []ItemView
}

// ItemView is one item as the public sees it.
type ItemView struct {
	activity.Item
	StockRemaining int64
}

// Get returns activity id's public view; activity.ErrNotFound for a draft
// or an unknown id.
func (c *Catalog) Get(ctx context.Context, id int64) (View, error) {
	a, err := c.Activity(ctx, id)
	if err != nil {
		return View{}, err
	}
	left, items, err := c.stock.ItemsLeft(ctx, a)
	if err != nil {
		return View{}, err
	}
	v := View{Activity: a, StockRemaining: left}
	for _, it := range a.ItemList() {
		v.Items = append(v.Items, ItemView{Item: it, StockRemaining: items[it.SKU]})
	}
	return v, nil
}

// Activity returns activity id's public record without its live stock,
// so from memory or MySQL and never Redis: presence asks it whether an
// activity may be watched. activity.ErrNotFound for a draft or an unknown
// id.
func (c *Catalog) Activity(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := c.record(ctx, id)
	if err != nil {
		return activity.Activity{}, err
	}
	if a.Status == activity.Draft {
		return activity.Activity{}, activity.ErrNotFound // drafts are not public
	}
	return a, nil
}

// record is activity id's record, from the cache while it is fresh.
func (c *Catalog) record(ctx context.Context, id int64) (activity.Activity, error) {
	if e, ok := c.known.Get(id); ok && time.Since(e.at) < c.cfg.CacheTTL {
		return e.a, nil
	}
	if at, ok := c.missing.Get(id); ok && time.Since(at) < c.cfg.CacheTTL {
		return activity.Activity{}, activity.ErrNotFound
	}
	a, err := c.records.Get(ctx, id)
	switch {
	case errors.Is(err, activity.ErrNotFound):
		c.known.Remove(id) // deleted, if it ever is
		c.missing.Add(id, time.Now())
	case err != nil:
		return activity.Activity{}, err
	default:
		c.missing.Remove(id) // created since
		c.known.Add(id, cached{a: a, at: time.Now()})
	}
	return a, err
}
