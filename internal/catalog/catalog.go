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
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
)

// Records reads activity records (mysqlstore.Activities).
type Records interface {
	Get(ctx context.Context, id int64) (activity.Activity, error)
}

// Stock reads the units an activity has left (stock.Store).
type Stock interface {
	Remaining(ctx context.Context, id int64) (int64, error)
}

// Config tunes the Catalog. The zero value gives the defaults in the comments.
type Config struct {
	// CacheTTL is how long an activity's record is served from memory. Default 1s.
	CacheTTL time.Duration
	// CacheSize bounds the records kept; beyond it the cache starts over.
	// Default 10,000.
	CacheSize int
}

// Catalog serves the public view of activities.
type Catalog struct {
	records Records
	stock   Stock
	cfg     Config

	mu sync.Mutex
	m  map[int64]cached
}

type cached struct {
	a       activity.Activity
	missing bool // no such activity: remembered too, or every unknown id would reach MySQL
	at      time.Time
}

// New returns a catalog.
func New(records Records, stock Stock, cfg Config) *Catalog {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Second
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10_000
	}
	return &Catalog{records: records, stock: stock, cfg: cfg, m: map[int64]cached{}}
}

// View is an activity as the public sees it.
type View struct {
	activity.Activity
	StockRemaining int64
}

// Get returns activity id's public view; activity.ErrNotFound for a draft
// or an unknown id.
func (c *Catalog) Get(ctx context.Context, id int64) (View, error) {
	a, err := c.record(ctx, id)
	if err != nil {
		return View{}, err
	}
	if a.Status == activity.Draft {
		return View{}, activity.ErrNotFound // drafts are not public
	}
	left, err := c.stock.Remaining(ctx, id)
	if err != nil {
		return View{}, err
	}
	return View{Activity: a, StockRemaining: left}, nil
}

// record is activity id's record, from the cache while it is fresh.
func (c *Catalog) record(ctx context.Context, id int64) (activity.Activity, error) {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.cfg.CacheTTL {
		if e.missing {
			return activity.Activity{}, activity.ErrNotFound
		}
		return e.a, nil
	}
	a, err := c.records.Get(ctx, id)
	missing := errors.Is(err, activity.ErrNotFound)
	if err != nil && !missing {
		return activity.Activity{}, err
	}
	c.mu.Lock()
	if len(c.m) >= c.cfg.CacheSize {
		clear(c.m)
	}
	c.m[id] = cached{a: a, missing: missing, at: time.Now()}
	c.mu.Unlock()
	return a, err
}
