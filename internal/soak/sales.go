package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/stock"
)

// Every sale's payment time is the shortest allowed, so unpaid orders time
// out many times over even in a short run.
const payTTL = 10 * time.Second

// sale is an activity the soak put on sale.
type sale struct {
	ID        int64
	Kind      string // seckill or groupbuy
	Total     int64
	Limit     int64
	GroupSize int
	GroupTTL  time.Duration
	Shards    int           // a flash sale's (activity.Shards)
	Opened    time.Duration // after the start

	paidUnits atomic.Int64 // units of pays the shoppers were told succeeded
}

func (s *sale) String() string {
	if s.Kind == "groupbuy" {
		return fmt.Sprintf("sale %d (group buy, %d units, limit %d, groups of %d in %v)", s.ID, s.Total, s.Limit, s.GroupSize, s.GroupTTL)
	}
	if s.Shards > 1 {
		return fmt.Sprintf("sale %d (flash sale in %d shards, %d units, limit %d)", s.ID, s.Shards, s.Total, s.Limit)
	}
	return fmt.Sprintf("sale %d (flash sale, %d units, limit %d)", s.ID, s.Total, s.Limit)
}

// catalog is every sale of the run and the ones on sale now: two flash
// sales (one of them split into 2-4 shards: its units move between shards
// as its shoppers drain one; activity.Shards) and two group buys, so that orders and groups of different sales
// interleave in the api's batches, the worker's tasks and the settlements
// (until 2026-11-24 one group buy: nothing checked that one sale's groups
// never touch another's). A sale whose units are largely paid for has little
// left to exercise (paid units never come back), so it is retired — no new
// orders; its pending orders still play out — and a new one takes its
// place: the run keeps selling for an hour on a few hundred units a sale.
type catalog struct {
	r   *run
	rng *rand.Rand // only the rotation's goroutine draws, after open

	mu  sync.Mutex
	all []*sale
	now []*sale // on sale: [flash, flash, group buy, group buy]

	failed int // creations failed in a row (rotate's own)
}

func newCatalog(r *run, rng *rand.Rand) *catalog { return &catalog{r: r, rng: rng} }

// open puts the first sales on.
func (c *catalog) open(ctx context.Context) error {
	for i, kind := range []string{"seckill", "seckill", "groupbuy", "groupbuy"} {
		s, err := c.create(ctx, kind, i == 1)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.now = append(c.now, s)
		c.mu.Unlock()
	}
	return nil
}

// create draws a sale's rules (sharded: a flash sale of 2-4 shards) and
// creates and publishes it through the admin API.
func (c *catalog) create(ctx context.Context, kind string, sharded bool) (*sale, error) {
	s := &sale{Kind: kind, Total: 200 + c.rng.Int64N(301), Limit: 1 + c.rng.Int64N(3)}
	if sharded {
		s.Shards = 2 + c.rng.IntN(3)
	}
	ls := loadtest.Sale{Type: kind, Stock: int(s.Total), Limit: int(s.Limit), PayTTL: payTTL, Shards: s.Shards}
	if kind == "groupbuy" {
		s.GroupSize, s.GroupTTL = 2+c.rng.IntN(2), time.Duration(10+c.rng.IntN(11))*time.Second
		ls.GroupSize, ls.GroupTTL = s.GroupSize, s.GroupTTL
	}
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	id, err := loadtest.CreateSale(actx, c.r.stack.URL, c.r.stack.AdminToken, ls)
	if err != nil {
		return nil, fmt.Errorf("create a %s: %w", kind, err)
	}
	s.ID, s.Opened = id, c.r.since()
	if kind == "seckill" {
		c.r.hist.sale(s.ID, s.Total, s.Limit)
	}
	c.mu.Lock()
	c.all = append(c.all, s)
	c.mu.Unlock()
	c.r.say("on sale: %s", s)
	return s, nil
}

// pick is a sale of kind on sale now, drawn with rng.
func (c *catalog) pick(rng *rand.Rand, kind string) *sale {
	c.mu.Lock()
	defer c.mu.Unlock()
	var of []*sale
	for _, s := range c.now {
		if s.Kind == kind {
			of = append(of, s)
		}
	}
	return of[rng.IntN(len(of))]
}

// roomiest is the flash sale on sale now with the most units left (by
// Redis), where a surge of orders is accepted rather than refused; the
// first one if Redis does not say.
func (c *catalog) roomiest(ctx context.Context) *sale {
	c.mu.Lock()
	now := append([]*sale(nil), c.now...)
	c.mu.Unlock()
	var best *sale
	most := int64(-1)
	for _, s := range now {
		if s.Kind != "seckill" {
			continue
		}
		left, err := stock.New(c.r.rdb, stock.Config{}).Remaining(ctx, s.ID)
		if best == nil || (err == nil && left > most) {
			best, most = s, left
		}
	}
	return best
}

// every is every sale so far.
func (c *catalog) every() []*sale {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sale(nil), c.all...)
}

// rotate replaces a sale whose units are two-thirds paid for, until ctx
// ends (later, what is left is mostly sold out and refusals). A
// creation that fails (MariaDB stopped, an api killed mid-request) is
// tried again next tick: the soak's own admin calls ride out the faults
// like a shopper's.
func (c *catalog) rotate(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		now := append([]*sale(nil), c.now...)
		c.mu.Unlock()
		for i, old := range now {
			if paid := old.paidUnits.Load(); paid*3 < old.Total*2 {
				continue
			}
			s, err := c.create(ctx, old.Kind, old.Shards > 1)
			if err != nil {
				if c.failed++; c.failed == 1 && ctx.Err() == nil {
					c.r.say("cannot open a new sale yet (trying every second): %v", err)
				}
				continue
			}
			tries := ""
			if c.failed > 0 {
				tries = fmt.Sprintf(" (opened after %d failed tries)", c.failed)
			}
			c.r.say("%d of %d units of sale %d paid for: sale %d takes its place%s", old.paidUnits.Load(), old.Total, old.ID, s.ID, tries)
			c.failed = 0
			c.mu.Lock()
			c.now[i] = s
			c.mu.Unlock()
		}
	}
}
