package admin

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/refusal"
)

// What an admin changes in a sale while it sells: its stock (Restock) and
// whether it takes orders (Pause, Resume). Each is one version of the
// activity in MySQL, under its row lock, and reaches Redis by a load of
// that version (stock's load.lua), so racing admin changes end at the
// latest, a change whose load failed is loaded by the reconciler (Repair),
// and a close wins over everything (load.lua keeps a closed sale closed).

// Restock adds add units of item sku to published sale id; a negative add
// removes that many unsold units, never more than are unsold (a refusal of
// kind activity.ErrConflict otherwise, nothing changed). The ledger
// records it with the version it made.
//
// Units are added to MySQL's record first and to Redis by the load that
// follows; they are taken out of Redis first (stock.Keeper.Take, at the
// version MySQL holds, under the row lock) and out of the record after.
// Either way Redis never holds more units than the record says the sale
// has — the invariant sold ≤ initial + added − removed — whatever fails
// between the two: a failed load of an addition is the reconciler's to
// repair (Repair); a removal whose record failed leaves Redis short of
// what the record says until the next change's load gives the units back.
// A sold-out sale or item given units sells again at once in every api
// process: the load publishes the restock notice that lets the local
// sold-out flags go.
func (s *Service) Restock(ctx context.Context, id int64, sku string, add int) (activity.Activity, activity.StockChange, error) {
	if err := activity.CheckStockChange(add); err != nil {
		return activity.Activity{}, activity.StockChange{}, err
	}
	if sku == "" {
		return activity.Activity{}, activity.StockChange{}, refusal.OfField(activity.ErrInvalid, "item", "is required: the sku of the item to restock")
	}
	check := func(a *activity.Activity) error {
		if err := s.stillLive(a); err != nil {
			return err
		}
		if a.Status != activity.Published {
			return refusal.New(activity.ErrConflict, "only a published sale is restocked, not a %s one", a.Status)
		}
		return nil
	}
	var during func(before, after activity.Activity) error
	if add < 0 {
		during = func(before, _ activity.Activity) error {
			_, err := s.stock.Take(ctx, before, sku, int64(-add))
			return err
		}
	}
	a, ch, err := s.repo.ChangeStock(ctx, id, sku, add, check, during)
	if err != nil {
		return activity.Activity{}, activity.StockChange{}, err
	}
	if _, err := s.load(ctx, a); err != nil {
		return a, ch, fmt.Errorf("recorded, but not yet loaded into Redis (the worker loads it within seconds): %w", err)
	}
	return a, ch, nil
}

// Pause stops published sale id taking orders and groups (activity.ErrPaused
// to each) until Resume; payments, cancellations, timeouts and
// persistence go on. Pausing a paused sale changes nothing but the
// version. A closed sale or a draft is not paused (activity.ErrConflict).
func (s *Service) Pause(ctx context.Context, id int64) (activity.Activity, error) {
	return s.setPaused(ctx, id, true)
}

// Resume lets paused sale id take orders again; resuming a sale that is
// not paused changes nothing but the version. It never reopens a closed
// sale (activity.ErrConflict: closed is final).
func (s *Service) Resume(ctx context.Context, id int64) (activity.Activity, error) {
	return s.setPaused(ctx, id, false)
}

func (s *Service) setPaused(ctx context.Context, id int64, paused bool) (activity.Activity, error) {
	verb := map[bool]string{true: "paused", false: "resumed"}[paused]
	a, err := s.repo.Update(ctx, id, func(a *activity.Activity) error {
		if err := s.stillLive(a); err != nil {
			return err
		}
		switch a.Status {
		case activity.Draft:
			return refusal.New(activity.ErrConflict, "a draft is not on sale; it cannot be %s", verb)
		case activity.Closed:
			return refusal.New(activity.ErrConflict, "a closed sale stays closed; it cannot be %s", verb)
		}
		a.Paused = paused
		return nil
	})
	if err != nil {
		return activity.Activity{}, err
	}
	if _, err := s.load(ctx, a); err != nil {
		return a, fmt.Errorf("%s in MySQL, but Redis does not know yet (the worker loads it within seconds, or repeat it): %w", verb, err)
	}
	return a, nil
}
