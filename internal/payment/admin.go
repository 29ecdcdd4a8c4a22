package payment

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale/internal/order"
)

// OrderPayments is an order with its money, for the admin: its payment as
// Redis holds it live (nil when none started or the sale's keys are gone),
// and every payment MySQL recorded for it (a duplicate too), with refunds.
type OrderPayments struct {
	Order    order.Order
	Live     *Payment
	Recorded []Payment
}

// OfOrder returns order no with its payments.
func (s *Service) OfOrder(ctx context.Context, no string) (OrderPayments, error) {
	o, err := s.deps.Orders.Get(ctx, no, 0)
	if err != nil {
		return OrderPayments{}, err
	}
	out := OrderPayments{Order: o}
	switch p, err := s.deps.Store.Payment(ctx, no); {
	case err == nil:
		out.Live = &p
	case !errors.Is(err, ErrNotFound):
		return OrderPayments{}, err
	}
	if s.deps.Records != nil {
		if out.Recorded, err = s.deps.Records.OfOrder(ctx, no); err != nil {
			return OrderPayments{}, err
		}
	}
	return out, nil
}

// Reconciliation is a sale's payments as the provider has them against
// what this service recorded in MySQL: what an operator must look at.
type Reconciliation struct {
	ActivityID int64
	Provider   string
	// Provider and Recorded count the payments each side has.
	AtProvider, Recorded int
	// Missing are payments the provider has that MySQL does not (yet: a
	// record queued but not written, or a webhook never received).
	Missing []Intent
	// AmountDiffers are payments whose amount or currency differ between
	// the provider and the record.
	AmountDiffers []Intent
	// RefundsPending are confirmed payments that must be given back and
	// are not yet (flagged, or their order refunded).
	RefundsPending []Payment
	// Flagged are the confirmed payments that paid no order (late,
	// mismatched, duplicate, unknown order), refunded or not.
	Flagged []Payment
}

// InSync reports whether nothing needs an operator.
func (r Reconciliation) InSync() bool {
	return len(r.Missing) == 0 && len(r.AmountDiffers) == 0 && len(r.RefundsPending) == 0
}

// owed reports whether confirmed payment p's money must go back: it paid
// no order (flagged), or it paid an order since refunded (a failed
// group's member; the order names it).
func (s *Service) owed(ctx context.Context, p Payment) bool {
	if p.Flag != "" {
		return true
	}
	o, err := s.deps.Orders.Get(ctx, p.OrderNo, 0)
	return err == nil && o.Status == order.Refunded && (o.PaymentID == p.ID || o.PaymentID == "")
}

// Reconcile compares activity activityID's payments at the provider (those
// created since since) with the record.
func (s *Service) Reconcile(ctx context.Context, activityID int64, since time.Time) (Reconciliation, error) {
	out := Reconciliation{ActivityID: activityID, Provider: s.Provider()}
	at, err := s.deps.Provider.Payments(ctx, activityID, since)
	if err != nil {
		return out, err
	}
	var rec []Payment
	if s.deps.Records != nil {
		if rec, err = s.deps.Records.OfActivity(ctx, activityID); err != nil {
			return out, err
		}
	}
	out.AtProvider, out.Recorded = len(at), len(rec)
	byID := make(map[string]Payment, len(rec))
	for _, p := range rec {
		byID[p.ID] = p
		if p.Status == Succeeded && p.Flag != "" {
			out.Flagged = append(out.Flagged, p)
		}
		if p.Status == Succeeded && !p.Refunded() && s.owed(ctx, p) {
			out.RefundsPending = append(out.RefundsPending, p)
		}
	}
	for _, in := range at {
		p, ok := byID[in.ID]
		switch {
		case !ok:
			out.Missing = append(out.Missing, in)
		case p.AmountCents != in.AmountCents || p.Currency != in.Currency:
			out.AmountDiffers = append(out.AmountDiffers, in)
		}
	}
	return out, nil
}
