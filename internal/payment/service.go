package payment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Config tunes the Service. The zero value gives the defaults in the
// comments.
type Config struct {
	// Currency is every order's currency (PAYMENT_CURRENCY), ISO 4217 in
	// lower case. Default "cny".
	Currency string
}

// Deps are the Service's collaborators (ports.go).
type Deps struct {
	Provider Provider
	Orders   Orders
	Store    Store
	Tasks    Tasks
	Records  RecordReader // nil: the admin's views have no MySQL record
	Log      *slog.Logger
}

// Service starts orders' payments and acts on what the provider says of
// them.
type Service struct {
	deps    Deps
	cfg     Config
	foreign atomic.Int64 // events of payments not ours, ignored
}

// ForeignEvents is how many events of payments this service did not
// create it has ignored (flashsale_payment_events_foreign_total).
func (s *Service) ForeignEvents() int64 { return s.foreign.Load() }

// NewService returns the payment service.
func NewService(d Deps, cfg Config) *Service {
	if cfg.Currency == "" {
		cfg.Currency = "cny"
	}
	cfg.Currency = strings.ToLower(cfg.Currency)
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{deps: d, cfg: cfg}
}

// Provider is the service's provider's name ("stripe", "simulated").
func (s *Service) Provider() string { return s.deps.Provider.Name() }

// Started is what the shopper's app needs to pay an order: the payment
// (its id, the client secret to confirm it with, amount and currency) and
// the order as it is now — paid already when the provider confirmed at
// once (the simulated provider), else pending payment until the webhook.
type Started struct {
	Payment Payment
	Order   order.Order
}

// Start starts the payment of userID's order no, or returns the one started
// before (idempotent: one payment per order, at the provider too). The
// amount and currency are the order's. An order that cannot be paid is
// ErrNotPayable (paid already: its payment, not an error) — so is one whose
// payment the provider confirmed at once but too late (the order ended
// meanwhile; the money is given back) — another user's ErrNotFound, as the
// order domain says.
func (s *Service) Start(ctx context.Context, no string, userID int64) (Started, error) {
	o, err := s.deps.Orders.GetAcked(ctx, no, userID) // a refusal tells the shopper too
	if err != nil {
		return Started{}, err
	}
	p, err := s.deps.Store.Payment(ctx, no)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Started{}, err
	}
	before, started := p, err == nil
	switch {
	case o.Status == order.Paid && err == nil:
		return s.started(ctx, no, userID, p)
	case o.Status != order.PendingPayment:
		return Started{}, refusal.New(ErrNotPayable, "the order is %s", o.Status)
	case !time.Now().Before(o.PayBy):
		return Started{}, refusal.New(ErrNotPayable, "the payment time is over")
	}
	// A payment started before is asked for again, with the same key: the
	// provider answers the same payment (the first answer may have been
	// lost with its api), and one that confirms at once (the simulated
	// provider) confirms it now.
	in, err := s.deps.Provider.Create(ctx, Charge{
		OrderNo: no, ActivityID: o.ActivityID, AmountCents: o.AmountCents, Currency: s.cfg.Currency,
		Description: fmt.Sprintf("order %s", no), Key: ChargeKey(no),
	})
	if err != nil {
		return Started{}, fmt.Errorf("%w: create: %w", ErrProvider, err)
	}
	now := time.Now().UTC()
	p, err = s.deps.Store.SavePayment(ctx, Payment{
		ID: in.ID, Provider: s.Provider(), OrderNo: no, ActivityID: o.ActivityID, AmountCents: in.AmountCents,
		Currency: in.Currency, Status: in.Status, ClientSecret: in.ClientSecret, CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return Started{}, err
	}
	if !started || before.ID != p.ID || before.Status != p.Status {
		s.record(ctx, p)
	}
	return s.started(ctx, no, userID, p)
}

// started is Start's answer: order no as it is now — paid when a provider
// that confirms at once (the simulated one) delivered its webhook by now —
// read with the replicas' acknowledgement, so that no shopper is told
// paid what a failover takes back; and its payment.
func (s *Service) started(ctx context.Context, no string, userID int64, p Payment) (Started, error) {
	o, err := s.deps.Orders.GetAcked(ctx, no, userID)
	if err != nil {
		return Started{}, err
	}
	switch {
	case o.Status != order.Paid && o.Status != order.PendingPayment:
		// The order ended while its payment was being started: the
		// payment is cancelled at the provider, so that the shopper
		// cannot pay an order that is gone (the order's own change asked
		// before this payment was recorded, and found none to cancel).
		// Money the provider took already comes as late, and is given
		// back.
		if err := s.Abandon(ctx, no); err != nil {
			s.deps.Log.Warn("payment: an ended order's payment was not cancelled", "order", no, "err", err)
		}
		return Started{}, refusal.New(ErrNotPayable, "the order is %s; money taken for it is refunded", o.Status)
	case o.Status == order.PendingPayment && !time.Now().Before(o.PayBy):
		// Its payment time ran out meanwhile (the order's expiry is on its
		// way): nothing can pay it now.
		return Started{}, refusal.New(ErrNotPayable, "the payment time is over; money taken for it is refunded")
	}
	if p2, err := s.deps.Store.Payment(ctx, no); err == nil {
		p = p2
	}
	return Started{Payment: p, Order: o}, nil
}

// HandleEvent acts on a provider's webhook: verified, each event once.
// A confirmed payment pays its order (order.Service.Pay, the same
// Redis transition and acknowledgement as any change), or, when the order
// cannot be paid by it — cancelled, expired, its group failed, paid by
// another payment, an amount or currency not the order's, an order
// unknown — is recorded with its Flag and refunded. An error is the
// webhook's 4xx (ErrBadSignature, ErrBadEvent: the provider's retries
// would fail alike) or 5xx (anything else: the provider sends it again).
func (s *Service) HandleEvent(ctx context.Context, payload []byte, header http.Header) error {
	ev, err := s.deps.Provider.ParseEvent(payload, header)
	if err != nil {
		return err
	}
	if ev.Kind == Other {
		return nil
	}
	if ev.Foreign {
		// A payment this service did not create (Checkout, a Payment
		// Link, another app on the same account): not ours to pay an
		// order with, nor to give back.
		s.foreign.Add(1)
		s.deps.Log.Info("payment: an event of a payment this service did not create; ignored", "event", ev.ID,
			"payment", ev.PaymentID, "kind", ev.Kind)
		return nil
	}
	switch ev.Kind {
	case PaymentSucceeded:
		return s.confirmed(ctx, ev)
	case PaymentFailed:
		return s.once(ctx, ev, func() error { return s.changed(ctx, ev, Failed) })
	default: // PaymentCanceled
		return s.once(ctx, ev, func() error { return s.changed(ctx, ev, Canceled) })
	}
}

// once acts on event ev unless it was handled before (its id remembered),
// and remembers it once acted on: an event whose handling failed comes
// again. Acting twice on one (two deliveries at once) does no harm: a pay
// is a transition of its own payment, a refund one per payment. A
// confirmation that pays its order needs no mark (confirmed): the order
// it paid says so.
func (s *Service) once(ctx context.Context, ev Event, act func() error) error {
	seen, err := s.deps.Store.EventSeen(ctx, s.Provider(), ev.ID)
	if err != nil || seen {
		return err
	}
	if err := act(); err != nil {
		return err
	}
	return s.deps.Store.MarkSeen(ctx, s.Provider(), ev.ID)
}

// confirmed is a PaymentSucceeded event: the money is ours. The order is
// read once: pending payment with the money it asks, it is paid, in five
// round trips (the read, the payment's record, the order's lock, its
// transition, the release) — the worker's sync of the paid order writes the
// payment into MySQL (Settle); paid by this very payment already, the
// event is a replay (the provider's retry, an answer lost), and only the
// payment's record is checked; anything else is money to judge, once
// (Service.once), by the order as it is.
func (s *Service) confirmed(ctx context.Context, ev Event) error {
	p := Payment{
		ID: ev.PaymentID, Provider: s.Provider(), OrderNo: ev.OrderNo, AmountCents: ev.AmountCents,
		Currency: ev.Currency, Status: Succeeded, CreatedAt: ev.Created, UpdatedAt: time.Now().UTC(),
	}
	o, err := s.deps.Orders.Get(ctx, ev.OrderNo, 0)
	switch {
	case errors.Is(err, order.ErrNotFound) || errors.Is(err, order.ErrInvalid):
		p.Flag = UnknownOrder
		return s.once(ctx, ev, func() error { return s.giveBack(ctx, p) })
	case err != nil:
		return err
	}
	p.ActivityID = o.ActivityID
	switch {
	case paidBy(o, p.ID):
		return s.recorded(ctx, p)
	case ev.AmountCents != o.AmountCents || !strings.EqualFold(ev.Currency, s.cfg.Currency):
		p.Flag = Mismatch
		return s.once(ctx, ev, func() error { return s.giveBack(ctx, p) })
	case o.Status != order.PendingPayment:
		return s.once(ctx, ev, func() error { return s.pay(ctx, ev, p, o, false) })
	}
	return s.pay(ctx, ev, p, o, true)
}

// paidBy reports whether order o was paid by payment id (and perhaps
// refunded since).
func paidBy(o order.Order, id string) bool {
	return (o.Status == order.Paid || o.Status == order.Refunded) && o.PaymentID == id
}

// pay records confirmed payment p and pays order o with it. An order that
// cannot be paid by it is judged (Service.judge), and, with mark, the event
// remembered (Service.once did not wrap this call).
func (s *Service) pay(ctx context.Context, ev Event, p Payment, o order.Order, mark bool) error {
	// The money is recorded before the order changes: a process killed
	// in between leaves a confirmed payment beside an unpaid order, which
	// the provider's retry of this event pays, and the worker's sync of
	// the order, once it ends unpaid, gives back (Settle) — never a paid
	// order whose payment reads pending, nor an order refunded whose
	// money is not found to give back.
	saved, err := s.deps.Store.SavePayment(ctx, p)
	if err != nil {
		return err
	}
	_, err = s.deps.Orders.Pay(ctx, o, ev.PaymentID)
	if err == nil {
		if saved.ID != p.ID {
			// Another payment of the order held its record when this
			// one's money was recorded (two payments raced on one order):
			// the record is the paying payment's, the one the order now
			// names. Lost with this process, the event comes again, finds
			// the order paid by it, and saves it then (Service.recorded).
			if _, err := s.deps.Store.SavePayment(ctx, p); err != nil {
				return err
			}
		}
		return nil
	}
	if !errors.Is(err, order.ErrNotFound) && !errors.Is(err, order.ErrConflict) && !errors.Is(err, order.ErrGroupClosed) {
		return err // the order may still be payable: the provider sends the event again
	}
	// The order cannot be paid by this payment: judged by what the order
	// is now — from Redis, or, when Redis no longer keeps it (the sale
	// long over), from MySQL, which names the payment that paid it too.
	// An order that cannot be read is not judged: the error, and the
	// provider sends the event again (a failed read once took the
	// payment that paid the order for late money, and refunded it).
	now, err := s.deps.Orders.Get(ctx, ev.OrderNo, 0)
	if err != nil {
		return err
	}
	if err := s.judge(ctx, p, now); err != nil || !mark {
		return err
	}
	return s.deps.Store.MarkSeen(ctx, s.Provider(), ev.ID)
}

// recorded makes sure the record of payment p, which paid its order, is
// p's: a confirmation handled before, whose process died between paying
// the order and saving p over another payment's record (two payments
// raced on one order), is finished here, and p's record queued for MySQL
// (the worker's sync of the order found the other payment's, and left
// it). One read when it is done already.
func (s *Service) recorded(ctx context.Context, p Payment) error {
	cur, err := s.deps.Store.Payment(ctx, p.OrderNo)
	switch {
	case err == nil && cur.ID == p.ID && cur.Status == Succeeded:
		return nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	if _, err := s.deps.Store.SavePayment(ctx, p); err != nil {
		return err
	}
	s.record(ctx, p)
	return nil
}

// judge decides what confirmed payment p is to order o, which it could
// not pay (not pending payment, or not payable any more): the order's
// paying payment is the one the order names (order.Order.PaymentID) — p
// itself (its event handled before, and not marked: done), or another (p
// is a duplicate). An order that ended unpaid makes p late money. Both
// are given back, each payment under its own refund key.
func (s *Service) judge(ctx context.Context, p Payment, o order.Order) error {
	paid := o.Status == order.Paid || o.Status == order.Refunded
	switch {
	case paid && o.PaymentID == p.ID:
		s.record(ctx, p)
		return nil
	case paid && o.PaymentID == "":
		// Paid, and no payment named: a record from before orders named
		// their payment (Redis's before 2026-11-26, MySQL's before
		// migration 00009 found none to fill in). Nothing proves p a
		// duplicate, and giving back the money that paid an order is the
		// worse mistake: p is taken as its payment, and the admin's
		// reconciliation lists every payment of the order.
		s.deps.Log.Warn("payment: a paid order names no payment; taking this one as its payment", "payment", p.ID,
			"order", p.OrderNo)
		s.record(ctx, p)
		return nil
	case paid:
		p.Flag = Duplicate
	default:
		p.Flag = Late
	}
	return s.giveBack(ctx, p)
}

// giveBack records a confirmed payment that paid no order, with its flag,
// and queues its refund.
func (s *Service) giveBack(ctx context.Context, p Payment) error {
	if p.OrderNo != "" && p.ActivityID != 0 {
		saved, err := s.deps.Store.SavePayment(ctx, p)
		if err != nil {
			return err
		}
		if saved.ID == p.ID {
			p = saved
		}
	}
	if p.Refunded() {
		return nil
	}
	s.deps.Log.Warn("payment: money that pays no order; refunding it", "payment", p.ID, "order", p.OrderNo,
		"flag", p.Flag, "amount_cents", p.AmountCents, "currency", p.Currency)
	s.record(ctx, p)
	return s.deps.Tasks.QueueRefund(ctx, p)
}

// changed records a payment's new status (failed, cancelled): the order is
// untouched — a failed payment may be tried again, the same payment.
func (s *Service) changed(ctx context.Context, ev Event, st Status) error {
	p, err := s.deps.Store.Payment(ctx, ev.OrderNo)
	if errors.Is(err, ErrNotFound) || errors.Is(err, order.ErrInvalid) || (err == nil && p.ID != ev.PaymentID) {
		return nil // not this order's payment (any more): nothing to change
	}
	if err != nil {
		return err
	}
	if p.Status == Succeeded {
		return nil // a late "failed" after the money came: the money stands
	}
	p.Status, p.UpdatedAt = st, time.Now().UTC()
	if p, err = s.deps.Store.SavePayment(ctx, p); err != nil {
		return err
	}
	s.record(ctx, p)
	return nil
}

// record queues p's record in MySQL; a failure is logged (the next change
// of the payment records it again, and the admin's reconciliation shows
// it meanwhile).
func (s *Service) record(ctx context.Context, p Payment) {
	fctx, cancel := order.FollowUp(ctx)
	defer cancel()
	if err := s.deps.Tasks.RecordPayment(fctx, p); err != nil {
		s.deps.Log.Warn("payment: its record was not queued", "payment", p.ID, "order", p.OrderNo, "err", err)
	}
}

// Abandon stops order no's payment from being paid later, where the
// provider allows: its payment time ran out, the shopper cancelled, its
// group failed unpaid. A payment the provider already took is not
// cancelled: its webhook comes, and the late money is refunded.
func (s *Service) Abandon(ctx context.Context, no string) error {
	p, err := s.deps.Store.Payment(ctx, no)
	if errors.Is(err, ErrNotFound) {
		return nil // never started
	}
	if err != nil {
		return err
	}
	if p.Status != Pending && p.Status != Failed {
		return nil
	}
	err = s.deps.Provider.Cancel(ctx, p.ID)
	if errors.Is(err, ErrNotCancelable) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: cancel: %w", ErrProvider, err)
	}
	p.Status, p.UpdatedAt = Canceled, time.Now().UTC()
	if p, err = s.deps.Store.SavePayment(ctx, p); err != nil {
		return err
	}
	s.record(ctx, p)
	return nil
}

// RefundOrder gives back the money that paid order no, now refunded (a
// failed group's paid member): its paying payment's refund is queued once.
func (s *Service) RefundOrder(ctx context.Context, no string) error {
	o, err := s.deps.Orders.Get(ctx, no, 0)
	if err != nil {
		return err
	}
	return s.refundPayer(ctx, o)
}

// refundPayer queues the refund of the payment that paid refunded order
// o: the one the order names, whatever its record says — a record that
// names another payment (a duplicate that raced it) or none (lost) is not
// trusted with the money that paid. Such a refund is made from the order:
// the paying payment's amount is the order's (a payment of another amount
// pays no order), and the provider refunds by payment id.
func (s *Service) refundPayer(ctx context.Context, o order.Order) error {
	if o.Status != order.Refunded || o.PaymentID == "" {
		return nil // not refunded, or paid before payments were real: nothing to give back here
	}
	p, err := s.deps.Store.Payment(ctx, o.No)
	switch {
	case err == nil && p.ID == o.PaymentID:
		if p.Refunded() {
			return nil
		}
	case err == nil || errors.Is(err, ErrNotFound):
		now := time.Now().UTC()
		p = Payment{ID: o.PaymentID, Provider: s.Provider(), OrderNo: o.No, ActivityID: o.ActivityID,
			AmountCents: o.AmountCents, Currency: s.cfg.Currency, Status: Succeeded, CreatedAt: o.PaidAt, UpdatedAt: now}
	default:
		return err
	}
	return s.deps.Tasks.QueueRefund(ctx, p)
}

// Settle is the durable backstop of an order's money, run by the worker's
// sync of every order that reached its end (tasks.Worker.WithPayments):
// what the api did at the change, and could have lost with its process,
// is done again, each step once whatever the repeats. The payment that
// paid a paid order is recorded in MySQL; a refunded order's paying
// payment is given back; a confirmed payment beside an order that ended
// unpaid (cancelled, expired: the process that recorded the money died
// before the order was paid, and no retry of the webhook came in time) is
// late money, flagged and given back. An order still pending payment is
// left.
func (s *Service) Settle(ctx context.Context, o order.Order) error {
	switch o.Status {
	case order.PendingPayment:
		return nil
	case order.Refunded:
		return s.refundPayer(ctx, o)
	}
	p, err := s.deps.Store.Payment(ctx, o.No)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case p.Status != Succeeded:
		return nil
	case o.Status == order.Paid:
		if p.ID != o.PaymentID {
			return nil // the record is another payment's for now: the paying one's webhook records it
		}
		return s.deps.Tasks.RecordPayment(ctx, p)
	case o.Status == order.Cancelled && p.ID != o.PaymentID:
		if p.Flag == "" {
			p.Flag = Late
		}
		return s.giveBack(ctx, p) // nothing when given back already
	}
	return nil
}

// Refund gives payment p's money back through the provider (the worker's
// refund task): once per payment, whatever retries — the provider's
// idempotency key is the payment's (RefundKey).
func (s *Service) Refund(ctx context.Context, p Payment) (Payment, error) {
	id, err := s.deps.Provider.Refund(ctx, p.ID, p.AmountCents, RefundKey(p.ID))
	if err != nil {
		return p, fmt.Errorf("%w: refund: %w", ErrProvider, err)
	}
	p.RefundID, p.UpdatedAt = id, time.Now().UTC()
	if p.OrderNo != "" && p.ActivityID != 0 {
		saved, err := s.deps.Store.SavePayment(ctx, p)
		if err != nil {
			return p, err
		}
		if saved.ID == p.ID {
			p = saved
		}
	}
	return p, nil
}

// UseOrders sets the order domain the service pays orders through. The
// two services know each other — an order's change tells its payment
// (order.Deps.Payments), a confirmed payment pays its order — so the one
// built second is handed to the first.
func (s *Service) UseOrders(o Orders) { s.deps.Orders = o }
