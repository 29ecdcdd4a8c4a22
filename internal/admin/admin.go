// Package admin is what an admin does with activities: create and change
// them, publish them into Redis, close them, and see their live figures. It
// keeps MySQL (the record) and Redis (the live stock) in step.
//
// Admin changes of one activity are serialised by MySQL's row lock, and
// each carries the version that lock gave it into Redis, where a load of
// an older version changes nothing and a closed sale never reopens
// (stock's load.lua): a fencing token rather than a lease, so even an
// admin process paused between its MySQL write and its Redis load cannot
// put an older state back. Whatever the interleaving, Redis ends at
// MySQL's latest, and a repeated close or publish repairs a failed load;
// so does the worker's reconciler, each pass (Repair), for a sale Redis
// holds.
package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Repository is the record of activities (mysqlstore.Activities).
type Repository interface {
	Create(ctx context.Context, a *activity.Activity) error
	Get(ctx context.Context, id int64) (activity.Activity, error)
	List(ctx context.Context, status activity.Status, page, pageSize int) ([]activity.Activity, int64, error)
	Update(ctx context.Context, id int64, fn func(*activity.Activity) error) (activity.Activity, error)
	// ChangeStock adds delta units to item sku of activity id under its
	// row lock: check refuses what its state does not allow, during runs
	// before the change is written (its error aborts it), and the change
	// is one version with its row in the stock ledger.
	ChangeStock(ctx context.Context, id int64, sku string, delta int, check func(*activity.Activity) error,
		during func(before, after activity.Activity) error) (activity.Activity, activity.StockChange, error)
}

// Stock is the live stock (stock.Keeper).
type Stock interface {
	Load(ctx context.Context, a activity.Activity) (int64, error)
	// ReadAt reads id's live figures, its orders waiting for MySQL
	// counted as overdue past activity.PersistenceGrace before now.
	ReadAt(ctx context.Context, id int64, now time.Time) (activity.Live, error)
	// Version returns the version of id's rules Redis holds, and false
	// when Redis holds no sale of that id.
	Version(ctx context.Context, id int64) (int64, bool, error)
	// RemainingMany returns the units each of ids has left, leaving out
	// those never loaded.
	RemainingMany(ctx context.Context, ids []int64) (map[int64]int64, error)
	// Take removes units of item sku from sale a, as MySQL holds it under
	// its row lock, never more than are unsold (stock.Keeper.Take).
	Take(ctx context.Context, a activity.Activity, sku string, units int64) (int64, error)
}

// Orders counts what the record of orders (mysqlstore.Orders) holds for an
// activity: orders, and units of those not cancelled or refunded.
type Orders interface {
	Persisted(ctx context.Context, activityID int64) (orders, units int64, err error)
}

// Records reads orders' records in Redis (redisstore.Orders): what the
// orders waiting for MySQL hold. Orders whose record is gone are missing.
type Records interface {
	GetMany(ctx context.Context, nos []string) (found []order.Order, missing []string, err error)
}

// Service is the admin use cases.
type Service struct {
	repo    Repository
	stock   Stock
	orders  Orders  // nil: the figures read as unknown
	records Records // nil: what orders waiting for MySQL hold is unknown
	samples Samples // nil: no recent figures kept (WithSamples)
	queues  Queues  // nil: no waiting room's figures (WithQueues)
	cfg     Config
}

// Queues reads a waiting room's figures (the app adapts
// waitingroom.Service.Stats).
type Queues interface {
	QueueFigures(ctx context.Context, id int64) (QueueFigures, error)
}

// QueueFigures are a waiting room's figures as the admin sees them.
type QueueFigures struct {
	Status  string // waiting, sold_out, closed; "" before the start
	Joined  int64  // places given
	Serving int64  // the serving counter: places admitted
	Waiting int64  // places beyond it
	// AdmittedPerSecond is the counter's measured advance a second over the
	// last seconds (stalls and pauses included), against the rate set
	// (the activity's admit_per_second).
	AdmittedPerSecond float64
	// EstimatedWait is the last in line's wait at the rate set; -1 when
	// unknown (paused, before the start, not waiting).
	EstimatedWait time.Duration
}

// WithQueues makes Get report a waiting room's figures (Detail.Queue).
func (s *Service) WithQueues(q Queues) *Service {
	s.queues = q
	return s
}

// Config tunes the Service. The zero value gives the defaults in the comments.
type Config struct {
	// Retention is how long a sale's live records outlive its last change
	// (activity.LiveUntil); the stock's own setting. Default
	// activity.DefaultRetention.
	Retention time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxStock, when above 0, is the most units a sale may have here
	// (activity.MaxStock's, lower), and MaxStockReason says why: embedded
	// mode's in-memory SQL server. Default 0: activity.MaxStock alone.
	MaxStock       int
	MaxStockReason string
	// Loaded, if set, is told each activity an admin change loaded into
	// Redis (its rules as they are now): the api nudges the waiting room's
	// watchers of a sale that closed, paused, resumed or changed its rate,
	// so that the waiting shoppers hear of it at once, not at the next
	// tick. Called on the request's goroutine: it must be quick.
	Loaded func(ctx context.Context, a activity.Activity)
}

// New returns the service. orders and records may be nil.
func New(repo Repository, st Stock, orders Orders, records Records, cfg Config) *Service {
	if cfg.Retention <= 0 {
		cfg.Retention = activity.DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{repo: repo, stock: st, orders: orders, records: records, cfg: cfg}
}

// stillLive refuses a change of a sale whose live records in Redis have
// expired (activity.LiveUntil): loading it again would bring its whole
// stock back with nobody's purchases counted, reselling what sold.
func (s *Service) stillLive(a *activity.Activity) error {
	if a.Status != activity.Draft && !s.cfg.Now().Before(a.LiveUntil(s.cfg.Retention)) {
		return refusal.New(activity.ErrConflict, "the sale's live records expired at %s; it can no longer change",
			a.LiveUntil(s.cfg.Retention).UTC().Format(time.RFC3339))
	}
	return nil
}

// withinMaxStock refuses a sale of more units than Config.MaxStock, as
// the total_stock field's error, with the reason.
func (s *Service) withinMaxStock(a activity.Activity) error {
	if s.cfg.MaxStock > 0 && a.TotalStock > s.cfg.MaxStock {
		return &activity.FieldError{Field: "total_stock",
			Message: fmt.Sprintf("must be at most %d here: %s", s.cfg.MaxStock, s.cfg.MaxStockReason)}
	}
	return nil
}

// Create records a new draft activity; a zero PaymentTTL takes the
// default, zero Shards 1.
func (s *Service) Create(ctx context.Context, a activity.Activity) (activity.Activity, error) {
	a.ID, a.Status = 0, activity.Draft
	if a.PaymentTTL == 0 {
		a.PaymentTTL = activity.DefaultPaymentTTL
	}
	a.Shards = a.ShardCount()
	if err := a.Validate(); err != nil {
		return activity.Activity{}, err
	}
	a.Normalize()
	if err := s.withinMaxStock(a); err != nil {
		return activity.Activity{}, err
	}
	if err := s.repo.Create(ctx, &a); err != nil {
		return activity.Activity{}, err
	}
	return a, nil
}

// Summary is an activity as listed: with the units it has left.
type Summary struct {
	activity.Activity
	// StockRemaining is the units left in Redis; nil for a draft, or a
	// sale whose live records expired.
	StockRemaining *int64
}

// List returns a page of activities, newest first, each with the units it
// has left (one Redis round trip for the page).
func (s *Service) List(ctx context.Context, status activity.Status, page, pageSize int) ([]Summary, int64, error) {
	items, total, err := s.repo.List(ctx, status, page, pageSize)
	if err != nil {
		return nil, 0, err
	}
	var live []int64
	for _, a := range items {
		if a.Status != activity.Draft {
			live = append(live, a.ID)
		}
	}
	left, err := s.stock.RemainingMany(ctx, live)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Summary, len(items))
	for i, a := range items {
		out[i].Activity = a
		if n, ok := left[a.ID]; ok && a.Status != activity.Draft {
			out[i].StockRemaining = &n
		}
	}
	return out, total, nil
}

// Update applies p (see activity.Apply for what a published activity may
// still change) and, for a live activity, refreshes its rules in Redis.
func (s *Service) Update(ctx context.Context, id int64, p activity.Patch) (activity.Activity, error) {
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error {
		if err := s.stillLive(a); err != nil {
			return err
		}
		if err := a.Apply(p); err != nil {
			return err
		}
		return s.withinMaxStock(*a)
	})
	if err != nil {
		return activity.Activity{}, err
	}
	if a.Status != activity.Draft {
		if _, err := s.load(ctx, a); err != nil {
			return a, fmt.Errorf("recorded, but Redis still has the old rules (the worker loads them within seconds, or update again): %w", err)
		}
	}
	return a, nil
}

// load loads a's rules into Redis and, once loaded, tells Config.Loaded.
func (s *Service) load(ctx context.Context, a activity.Activity) (int64, error) {
	live, err := s.stock.Load(ctx, a)
	if err == nil && s.cfg.Loaded != nil {
		s.cfg.Loaded(ctx, a)
	}
	return live, err
}

// Publish makes a draft activity live: recorded as published in MySQL,
// then its rules and stock loaded into Redis. Publishing again reloads the
// rules and never resets the stock, so it is safe to repeat, e.g. after a
// crash between the two steps.
func (s *Service) Publish(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error {
		if err := s.stillLive(a); err != nil {
			return err
		}
		switch a.Status {
		case activity.Closed:
			return refusal.New(activity.ErrConflict, "a closed activity cannot be published again")
		case activity.Draft:
			a.Status = activity.Published
		}
		return nil
	})
	if err != nil {
		return activity.Activity{}, err
	}
	if _, err := s.load(ctx, a); err != nil {
		return a, fmt.Errorf("published in MySQL but not loaded into Redis (publish again to retry): %w", err)
	}
	return a, nil
}

// Close stops sales: recorded as closed in MySQL, then loaded into Redis
// as closed, which refuses every further order. Closing again changes
// nothing in MySQL but loads Redis once more, so a close whose Redis load
// failed (or raced) is repaired by repeating it.
func (s *Service) Close(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error {
		if a.Status == activity.Draft {
			return refusal.New(activity.ErrConflict, "a draft is not on sale; there is nothing to close")
		}
		a.Status, a.Paused = activity.Closed, false // closing ends a pause too: closed is final
		return nil
	})
	if err != nil {
		return activity.Activity{}, err
	}
	if _, err := s.load(ctx, a); err != nil {
		return a, fmt.Errorf("closed in MySQL but Redis may still sell (the worker loads the close within seconds, or close again): %w", err)
	}
	return a, nil
}

// Repair brings Redis's rules of activity id to MySQL's when an admin
// change was recorded but its Redis load failed (an update, or a close:
// Redis would go on selling), and says whether it loaded. The reconciler
// runs it each pass, so such a change lands without the admin repeating it.
//
// It loads only a sale Redis holds at an older version. A sale Redis does
// not hold at all is left to the admin (publish again), and flagged by the
// reconciliation: Redis never having held it (a publish whose load failed)
// cannot be told from Redis having lost it, and loading a lost sale would
// bring back its whole stock with nobody's purchases counted. Nor does it
// load a sale whose live records expired (stillLive), for the same reason.
func (s *Service) Repair(ctx context.Context, id int64) (bool, error) {
	a, err := s.repo.Get(ctx, id)
	if err != nil || a.Status == activity.Draft || s.stillLive(&a) != nil {
		return false, err
	}
	v, held, err := s.stock.Version(ctx, id)
	if err != nil || !held || v >= a.Version {
		return false, err
	}
	if _, err := s.load(ctx, a); err != nil {
		return false, err
	}
	return true, nil
}

// Detail is an activity with its live figures.
type Detail struct {
	activity.Activity
	// StockRemaining is the units left in Redis; nil for a draft.
	StockRemaining *int64
	// OrdersAccepted is the orders Redis has accepted; nil for a draft.
	OrdersAccepted *int64
	// OrdersPersisted is the orders recorded in MySQL; nil while unknown.
	OrdersPersisted *int64
	// Reconciliation compares them; orders on their way to MySQL within
	// activity.PersistenceGrace are pending, not problems.
	Reconciliation activity.Report
	// Groups counts a group buy's groups by status; nil for a flash sale.
	Groups map[string]int64
	// PersistenceLag is how long the order waiting longest for MySQL has
	// waited (0 when none does); nil for a draft.
	PersistenceLag *time.Duration
	// Shards are a sharded sale's figures shard by shard (nil for a sale
	// of one shard, or a draft): what each holds, so an operator sees the
	// stock move to where the shoppers are.
	Shards []activity.ShardLive
	// Items are its items with their live figures, in the activity's
	// order (a sale of one item: the sale's).
	Items []ItemFigures
	// Queue is a published or closed sale's waiting room's figures; nil
	// for a sale without one, a draft, or a Service without WithQueues.
	Queue *QueueFigures
}

// ItemFigures is one item of a sale with its live figures.
type ItemFigures struct {
	activity.Item
	// Remaining is its units left in Redis and Sold its units sold (its
	// stock in Redis less what is left); nil for a draft, or when Redis
	// does not know the item.
	Remaining, Sold *int64
}

// itemFigures are a's items with v's figures of each.
func itemFigures(a activity.Activity, v activity.Live) []ItemFigures {
	items := a.ItemList()
	out := make([]ItemFigures, len(items))
	for i, it := range items {
		out[i].Item = it
		if live, ok := v.ItemFigures(it.SKU, len(items) == 1); ok {
			left, sold := live.Remaining, live.Total-live.Remaining
			out[i].Remaining, out[i].Sold = &left, &sold
		}
	}
	return out
}

// Get returns activity id with its live figures and whether Redis and MySQL
// agree. Redis's figures are read before MySQL's orders: an order recorded
// in between is then one Redis still listed as on its way, which explains
// it.
func (s *Service) Get(ctx context.Context, id int64) (Detail, error) {
	a, err := s.repo.Get(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	now := s.cfg.Now()
	v, err := s.stock.ReadAt(ctx, id, now)
	if err != nil {
		return Detail{}, err
	}
	if err := s.readUnrecorded(ctx, v.UnrecordedOrders); err != nil {
		return Detail{}, err
	}
	d := Detail{Activity: a, Items: itemFigures(a, v)}
	if a.WaitingRoom && a.Status != activity.Draft && s.queues != nil {
		q, err := s.queues.QueueFigures(ctx, id)
		if err != nil {
			return Detail{}, err
		}
		d.Queue = &q
	}
	if a.Type == activity.GroupBuy {
		d.Groups = map[string]int64{
			"forming":   v.GroupsOpened - v.GroupsSucceeded - v.GroupsFailed,
			"succeeded": v.GroupsSucceeded,
			"failed":    v.GroupsFailed,
		}
	}
	if v.Known {
		d.StockRemaining = &v.Remaining
		accepted := v.Accepted
		d.OrdersAccepted = &accepted
		lag := time.Duration(0)
		if !v.OldestUnrecorded.IsZero() {
			lag = max(0, now.Sub(v.OldestUnrecorded))
		}
		d.PersistenceLag = &lag
		d.Shards = v.Shards
	}
	units := int64(-1)
	if s.orders != nil {
		orders, u, err := s.orders.Persisted(ctx, id)
		if err != nil {
			return Detail{}, err
		}
		d.OrdersPersisted, units = &orders, u
	}
	d.Reconciliation = activity.Reconcile(a, v, units, now)
	return d, nil
}

// readUnrecorded fills in the Units of orders waiting for MySQL from their
// records (activity.UnrecordedOrder.Units). An order MySQL has not held
// (Persisted is false: it never left the outbox) adds its quantity while it
// holds units; one MySQL holds takes its quantity away once it holds none
// (cancelled, refunded). A record that is gone (its sale's keys expired)
// changes nothing.
func (s *Service) readUnrecorded(ctx context.Context, us []activity.UnrecordedOrder) error {
	if s.records == nil || len(us) == 0 {
		return nil
	}
	nos := make([]string, len(us))
	for i, u := range us {
		nos[i] = u.No
	}
	found, _, err := s.records.GetMany(ctx, nos)
	if err != nil {
		return err
	}
	units := make(map[string]int64, len(found))
	for _, o := range found {
		holds := o.Status == order.PendingPayment || o.Status == order.Paid
		switch {
		case holds && !o.Persisted:
			units[o.No] = int64(o.Quantity)
		case !holds && o.Persisted:
			units[o.No] = -int64(o.Quantity)
		}
	}
	for i := range us {
		us[i].Units, us[i].Known = units[us[i].No], true
	}
	return nil
}
