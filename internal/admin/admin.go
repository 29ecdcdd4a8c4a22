// Package admin is what an admin does with activities: create and change
// them, publish them into Redis, close them, and see their live figures. It
// keeps MySQL (the record) and Redis (the live stock) in step.
package admin

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Repository is the record of activities (mysqlstore.Activities).
type Repository interface {
	Create(ctx context.Context, a *activity.Activity) error
	Get(ctx context.Context, id int64) (activity.Activity, error)
	List(ctx context.Context, status activity.Status, page, pageSize int) ([]activity.Activity, int64, error)
	Update(ctx context.Context, id int64, fn func(*activity.Activity) error) (activity.Activity, error)
}

// Stock is the live stock (stock.Store).
type Stock interface {
	Load(ctx context.Context, a activity.Activity) (int64, error)
	Read(ctx context.Context, id int64) (activity.Live, error)
}

// Orders counts what the record of orders (mysqlstore.Orders) holds for an
// activity: orders, and units of those not cancelled or refunded.
type Orders interface {
	Persisted(ctx context.Context, activityID int64) (orders, units int64, err error)
}

// Service is the admin use cases.
type Service struct {
	repo   Repository
	stock  Stock
	orders Orders // nil: the figures read as unknown
}

// New returns the service. orders may be nil.
func New(repo Repository, st Stock, orders Orders) *Service {
	return &Service{repo: repo, stock: st, orders: orders}
}

// Create records a new draft activity; a zero PaymentTTL takes the default.
func (s *Service) Create(ctx context.Context, a activity.Activity) (activity.Activity, error) {
	a.ID, a.Status = 0, activity.Draft
	if a.PaymentTTL == 0 {
		a.PaymentTTL = activity.DefaultPaymentTTL
	}
	if err := a.Validate(); err != nil {
		return activity.Activity{}, err
	}
	if err := s.repo.Create(ctx, &a); err != nil {
		return activity.Activity{}, err
	}
	return a, nil
}

// List returns a page of activities, newest first.
func (s *Service) List(ctx context.Context, status activity.Status, page, pageSize int) ([]activity.Activity, int64, error) {
	return s.repo.List(ctx, status, page, pageSize)
}

// Update applies p (see activity.Apply for what a published activity may
// still change) and, for a live activity, refreshes its rules in Redis.
func (s *Service) Update(ctx context.Context, id int64, p activity.Patch) (activity.Activity, error) {
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error { return a.Apply(p) })
	if err != nil {
		return activity.Activity{}, err
	}
	if a.Status != activity.Draft {
		if _, err := s.stock.Load(ctx, a); err != nil {
			return a, fmt.Errorf("recorded, but Redis still has the old rules (update again to retry): %w", err)
		}
	}
	return a, nil
}

// Publish makes a draft activity live: recorded as published in MySQL,
// then its rules and stock loaded into Redis. Publishing again reloads the
// rules and never resets the stock, so it is safe to repeat, e.g. after a
// crash between the two steps.
func (s *Service) Publish(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error {
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
	if _, err := s.stock.Load(ctx, a); err != nil {
		return a, fmt.Errorf("published in MySQL but not loaded into Redis (publish again to retry): %w", err)
	}
	return a, nil
}

// Close stops sales at once: Redis refuses every further reservation before
// MySQL records the close. Closing a closed activity changes nothing.
func (s *Service) Close(ctx context.Context, id int64) (activity.Activity, error) {
	a, err := s.repo.Get(ctx, id)
	if err != nil {
		return activity.Activity{}, err
	}
	if a.Status == activity.Closed {
		return a, nil
	}
	closed := a
	closed.Status = activity.Closed
	if _, err := s.stock.Load(ctx, closed); err != nil {
		return activity.Activity{}, err
	}
	return s.repo.Update(ctx, id, func(a *activity.Activity) error {
		a.Status = activity.Closed
		return nil
	})
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
	Reconciliation  activity.Report
	// Groups counts a group buy's groups by status; nil for a flash sale.
	Groups map[string]int64
}

// Get returns activity id with its live figures and whether Redis and MySQL
// agree.
func (s *Service) Get(ctx context.Context, id int64) (Detail, error) {
	a, err := s.repo.Get(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	v, err := s.stock.Read(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Activity: a}
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
	}
	units := int64(-1)
	if s.orders != nil {
		orders, u, err := s.orders.Persisted(ctx, id)
		if err != nil {
			return Detail{}, err
		}
		d.OrdersPersisted, units = &orders, u
	}
	d.Reconciliation = activity.Reconcile(a, v, units)
	return d, nil
}
