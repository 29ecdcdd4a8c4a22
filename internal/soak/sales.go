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
	Shards    int // a flash sale's (activity.Shards)
	// Items is a flash sale's items (loadtest.ItemSKU's), when more than
	// one: its shoppers name one, and it is restocked and paused while it
	// sells (stocker.go). Its total then moves, so its history is left to
	// the invariants (item by item): porcupine's model is of a sale of one
	// stock that never changes.
	Items int
	// Room, above 0, puts a waiting room in front of a flash sale of one
	// item, not sharded (a room is refused with shards), letting in Room
	// shoppers a second (admit_per_second): its shoppers queue for an
	// admission and order with it (room.go).
	Room   int
	Opened time.Duration // after the start

	paidUnits atomic.Int64 // units of pays the shoppers were told succeeded

	mu       sync.Mutex
	admitted map[int64]bool // a sale with a room: the users the service told admitted
}

func (s *sale) String() string {
	if s.Kind == "groupbuy" {
		return fmt.Sprintf("sale %d (group buy, %d units, limit %d, groups of %d in %v)", s.ID, s.Total, s.Limit, s.GroupSize, s.GroupTTL)
	}
	if s.Shards > 1 {
		return fmt.Sprintf("sale %d (flash sale in %d shards, %d units, limit %d)", s.ID, s.Shards, s.Total, s.Limit)
	}
	if s.Room > 0 {
		return fmt.Sprintf("sale %d (flash sale behind a waiting room letting in %d a second, %d units, limit %d)", s.ID, s.Room, s.Total, s.Limit)
	}
	if s.Items > 1 {
		return fmt.Sprintf("sale %d (flash sale of %d items, %d units at first, limit %d across them; restocked and paused)", s.ID, s.Items, s.Total, s.Limit)
	}
	return fmt.Sprintf("sale %d (flash sale, %d units, limit %d)", s.ID, s.Total, s.Limit)
}

// catalog is every sale of the run and the ones on sale now: four flash
// sales (one of them split into 2-4 shards: its units move between shards
// as its shoppers drain one, activity.Shards; one of three items, restocked
// and paused while it sells; one behind a waiting room, whose shoppers
// queue for an admission first) and two group buys, so that orders and groups of different sales
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
	now []*sale // on sale: [flash, flash in shards, flash of items, flash behind a room, group buy, group buy]

	failed int // creations failed in a row (rotate's own)
}

func newCatalog(r *run, rng *rand.Rand) *catalog { return &catalog{r: r, rng: rng} }

// open puts the first sales on.
func (c *catalog) open(ctx context.Context) error {
	for _, like := range []shape{{kind: "seckill"}, {kind: "seckill", sharded: true}, {kind: "seckill", items: 3},
		{kind: "seckill", room: roomRate}, {kind: "groupbuy"}, {kind: "groupbuy"}} {
		s, err := c.create(ctx, like)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.now = append(c.now, s)
		c.mu.Unlock()
	}
	return nil
}

// shape is what a sale is: its kind, sharded (a flash sale of 2-4
// shards), its items, its waiting room's rate (0: none).
type shape struct {
	kind    string
	sharded bool
	items   int
	room    int
}

// shapeOf is s's shape.
func shapeOf(s *sale) shape {
	return shape{kind: s.Kind, sharded: s.Shards > 1, items: s.Items, room: s.Room}
}

// create draws the rules of a sale of shape like and creates and publishes
// it through the admin API.
func (c *catalog) create(ctx context.Context, like shape) (*sale, error) {
	kind := like.kind
	s := &sale{Kind: kind, Total: 200 + c.rng.Int64N(301), Limit: 1 + c.rng.Int64N(3), Items: like.items, Room: like.room}
	if like.sharded {
		s.Shards = 2 + c.rng.IntN(3)
	}
	ls := loadtest.Sale{Type: kind, Stock: int(s.Total), Limit: int(s.Limit), PayTTL: payTTL, Shards: s.Shards, Items: s.Items,
		AdmitPerSecond: s.Room}
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
	if s.modelled() {
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
// first one if Redis does not say. Not one behind a waiting room: a surge's
// orders carry no admission, and all would be refused 403.
func (c *catalog) roomiest(ctx context.Context) *sale {
	c.mu.Lock()
	now := append([]*sale(nil), c.now...)
	c.mu.Unlock()
	var best *sale
	most := int64(-1)
	for _, s := range now {
		if s.Kind != "seckill" || s.Room > 0 {
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
			s, err := c.create(ctx, shapeOf(old))
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

// modelled says s's history is checked by porcupine (history.go): a flash
// sale of one stock that never changes.
func (s *sale) modelled() bool { return s.Kind == "seckill" && s.Items <= 1 }

// ofItems are the sales of several items on sale now.
func (c *catalog) ofItems() []*sale {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*sale
	for _, s := range c.now {
		if s.Items > 1 {
			out = append(out, s)
		}
	}
	return out
}

// admit notes that the service told user they are admitted to s.
func (s *sale) admit(user int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted == nil {
		s.admitted = map[int64]bool{}
	}
	s.admitted[user] = true
}

// wasAdmitted tells whether the service ever told user they were admitted
// to s.
func (s *sale) wasAdmitted(user int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.admitted[user]
}
