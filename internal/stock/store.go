// Package stock keeps the live stock of published activities in Redis:
// atomic Lua scripts that reserve units for an order (sale window, per-user
// limit and stock checked and taken in one step) and give them back,
// idempotently per order, never above the total. A local sold-out flag
// refuses the crowd after a sale sells out without asking Redis.
//
// MySQL holds the record of activities and orders; Reconcile compares the
// two.
package stock

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func source(name string) string {
	b, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("stock: missing embedded script " + name) // a build mistake, caught by every test
	}
	return string(b)
}

// SaleLib is the Lua of the sale's rules (sale_check, sale_take,
// sale_return), for scripts elsewhere that take or return units; prepend it.
var SaleLib = source("lib_sale")

var (
	loadScript    = redis.NewScript(source("load"))
	reserveScript = redis.NewScript(SaleLib + source("reserve"))
	releaseScript = redis.NewScript(SaleLib + source("release"))
)

// Errors of this package; the sale's own refusals are activity's
// (ErrSoldOut, ErrLimitExceeded, ErrNotStarted, ErrEnded, ErrNotOnSale).
var (
	// ErrDuplicate: the order was reserved before (a retry).
	ErrDuplicate = errors.New("stock: order already reserved")
	// ErrInvalid: a malformed request (quantity, user, order number).
	ErrInvalid = errors.New("stock: invalid request")
	// ErrUnavailable wraps a failure to reach Redis.
	ErrUnavailable = errors.New("stock: redis unavailable")
)

// Config tunes a Store. The zero value gives the defaults in the comments.
type Config struct {
	// SoldOutTTL is how long the local sold-out flag refuses without asking
	// Redis when no restock notice clears it. Default 1s.
	SoldOutTTL time.Duration
	// Retention is how long an activity's keys outlive its end. Default 7 days.
	Retention time.Duration
}

// Store is the stock of all activities in one Redis.
type Store struct {
	rdb     redis.UniversalClient
	cfg     Config
	soldOut *soldOut
}

// New returns a Store on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.SoldOutTTL <= 0 {
		cfg.SoldOutTTL = time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	return &Store{rdb: rdb, cfg: cfg, soldOut: newSoldOut(cfg.SoldOutTTL)}
}

// Request asks for Qty units of an activity for one user's order.
type Request struct {
	ActivityID int64
	UserID     int64
	Qty        int
	OrderNo    string
}

func (r Request) validate() error {
	switch {
	case r.ActivityID <= 0:
		return fmt.Errorf("%w: activity id %d", ErrInvalid, r.ActivityID)
	case r.UserID <= 0:
		return fmt.Errorf("%w: user id %d", ErrInvalid, r.UserID)
	case r.Qty <= 0 || r.Qty > activity.MaxPerUserLimit:
		return fmt.Errorf("%w: quantity %d", ErrInvalid, r.Qty)
	case r.OrderNo == "" || len(r.OrderNo) > 64:
		return fmt.Errorf("%w: order number %q", ErrInvalid, r.OrderNo)
	}
	return nil
}

// Reservation is what a successful reserve left behind.
type Reservation struct {
	Remaining int64 // units left in the sale
	UserUnits int64 // units the user now holds in it
}

// Reserver takes stock for an order. Store does it in one Lua script; the
// seed recipes (LockedReserver) do it under a lock, for comparison.
type Reserver interface {
	Reserve(ctx context.Context, r Request) (Reservation, error)
}

// Reserve takes r.Qty units for r's order in one atomic script, or returns
// why not: activity.ErrSoldOut, ErrLimitExceeded, ErrNotStarted, ErrEnded,
// ErrNotOnSale, or ErrDuplicate for an order reserved before.
func (s *Store) Reserve(ctx context.Context, r Request) (Reservation, error) {
	if err := r.validate(); err != nil {
		return Reservation{}, err
	}
	if s.soldOut.is(r.ActivityID) {
		return Reservation{}, activity.ErrSoldOut
	}
	k := rediskeys.For(r.ActivityID)
	res, err := reserveScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.Users, k.Reserved}, r.UserID, r.Qty, r.OrderNo).Int64Slice()
	if err != nil {
		return Reservation{}, fmt.Errorf("%w: reserve: %w", ErrUnavailable, err)
	}
	if len(res) != 3 {
		return Reservation{}, fmt.Errorf("stock: reserve script returned %v", res)
	}
	out := Reservation{Remaining: res[1], UserUnits: res[2]}
	return out, s.outcome(r.ActivityID, res[0], out.Remaining)
}

// outcome maps a reserve script's code to its error.
func (s *Store) outcome(id, code, remaining int64) error {
	switch code {
	case 0:
		if remaining == 0 {
			s.soldOut.set(id)
		}
		return nil
	case 1:
		return activity.ErrNotOnSale
	case 2:
		return activity.ErrNotStarted
	case 3:
		return activity.ErrEnded
	case 4:
		return activity.ErrLimitExceeded
	case 5:
		if remaining == 0 { // not when 2 were asked for and 1 is left
			s.soldOut.set(id)
		}
		return activity.ErrSoldOut
	case 6:
		return ErrDuplicate
	}
	return fmt.Errorf("stock: reserve script returned code %d", code)
}

// Release gives orderNo's units back. It reports whether this call returned
// them: false when they had been returned before, or the order was never
// reserved here.
func (s *Store) Release(ctx context.Context, activityID int64, orderNo string) (bool, error) {
	k := rediskeys.For(activityID)
	res, err := releaseScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.Users, k.Reserved}, orderNo, k.Restock).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("%w: release: %w", ErrUnavailable, err)
	}
	if len(res) != 2 {
		return false, fmt.Errorf("stock: release script returned %v", res)
	}
	if res[0] == 0 && res[1] > 0 {
		s.soldOut.clear(activityID) // this process need not wait for the notice
	}
	return res[0] == 0, nil
}

// Load publishes a's rules and stock into Redis, or refreshes its rules (a
// later end, closing). The stock is set only the first time: loading again
// never undoes sales. It returns the units left.
func (s *Store) Load(ctx context.Context, a activity.Activity) (int64, error) {
	if a.Status != activity.Published && a.Status != activity.Closed {
		return 0, fmt.Errorf("%w: only a published or closed activity is loaded, not %s", ErrInvalid, a.Status)
	}
	k := rediskeys.For(a.ID)
	expireAt := a.EndsAt.Add(a.PaymentTTL + s.cfg.Retention).UnixMilli()
	left, err := loadScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.Users, k.Reserved}, string(a.Status), a.StartsAt.UnixMilli(), a.EndsAt.UnixMilli(),
		a.PerUserLimit, a.TotalStock, expireAt, a.PriceCents, a.PaymentTTL.Milliseconds(),
		string(a.Type), a.GroupSize, a.GroupTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: load: %w", ErrUnavailable, err)
	}
	return left, nil
}

// View is an activity's live figures in Redis.
type View struct {
	Known     bool // the activity was ever loaded
	Status    activity.Status
	Total     int64
	Remaining int64
	Accepted  int64 // reservations made
	Returned  int64 // reservations given back
	// Group buys: groups opened, and of those succeeded and failed.
	GroupsOpened, GroupsSucceeded, GroupsFailed int64
}

// SoldUnits is how many units are out: total minus what is left.
func (v View) SoldUnits() int64 { return v.Total - v.Remaining }

// Read returns activity id's live figures.
func (s *Store) Read(ctx context.Context, id int64) (View, error) {
	k := rediskeys.For(id)
	var meta *redis.MapStringStringCmd
	var left *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, k.Meta)
		left = p.Get(ctx, k.Stock)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return View{}, fmt.Errorf("%w: read: %w", ErrUnavailable, err)
	}
	m := meta.Val()
	if len(m) == 0 {
		return View{}, nil
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	v := View{
		Known: true, Status: activity.Status(m["status"]), Total: num(m["total"]),
		Accepted: num(m["accepted"]), Returned: num(m["returned"]),
		GroupsOpened: num(m["groups_opened"]), GroupsSucceeded: num(m["groups_succeeded"]), GroupsFailed: num(m["groups_failed"]),
	}
	v.Remaining, _ = left.Int64()
	return v, nil
}

// SoldOut reports whether this process currently refuses activity id
// locally as sold out.
func (s *Store) SoldOut(id int64) bool { return s.soldOut.is(id) }

// WatchRestock clears local sold-out flags when another process gives units
// back. It runs until ctx ends; run it in the background of any process that
// reserves. A dropped connection costs at most SoldOutTTL of refusals.
func (s *Store) WatchRestock(ctx context.Context, log *slog.Logger) {
	ps := s.rdb.PSubscribe(ctx, rediskeys.RestockPattern)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if id, ok := rediskeys.ActivityOfRestock(m.Channel); ok {
				s.soldOut.clear(id)
			} else if log != nil {
				log.Warn("stock: restock notice on an unexpected channel", "channel", m.Channel)
			}
		}
	}
}

// MarkSoldOut sets activity id's local sold-out flag (the order path learns
// it from its accept script).
func (s *Store) MarkSoldOut(id int64) { s.soldOut.set(id) }
