package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// ErrBadCursor is a Last-Event-ID that is not one of an order stream's ids.
var ErrBadCursor = errors.New("stream: Last-Event-ID is not an id this stream sent")

// Cursor is where an order's stream stands, and its SSE id: the sequence
// of the order's last event sent and of its group's ("2.1": order.paid and
// group.succeeded sent). An order's sequence numbers are fixed by the
// status each reports (webhook.SeqAccepted…), so a cursor says exactly
// which events a client holds, whichever api sent them.
type Cursor struct{ Order, Group int64 }

// String is the cursor as an SSE id.
func (c Cursor) String() string {
	return strconv.FormatInt(c.Order, 10) + "." + strconv.FormatInt(c.Group, 10)
}

// ParseCursor reads a Last-Event-ID: "" is the start; "<order seq>" or
// "<order seq>.<group seq>", each from 0 to 1,000,000.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	o, g, _ := strings.Cut(s, ".")
	var c Cursor
	var err error
	num := func(v string) int64 {
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil || n < 0 || n > 1_000_000 || v != strconv.FormatInt(n, 10) {
			err = fmt.Errorf("%w: %q", ErrBadCursor, s)
		}
		return n
	}
	c.Order = num(o)
	if g != "" || strings.Contains(s, ".") {
		c.Group = num(g)
	}
	return c, err
}

// OrderGetter reads an order as its owner's GET does (order.Service).
type OrderGetter interface {
	GetAcked(ctx context.Context, no string, userID int64) (order.Order, error)
}

// Outbox reads a subject's committed events after a sequence
// (mysqlstore.Webhooks.Of).
type Outbox interface {
	Of(ctx context.Context, subject string, after int64) ([]webhook.Event, error)
}

// OrdersConfig tunes Orders. The zero value gives the defaults.
type OrdersConfig struct {
	// Accepted derives order.accepted of an order whose events are not in
	// the outbox yet (accepted in Redis, not yet persisted): the same
	// derivation as the producers' (webhook.OrderEvents), so the same id.
	// Nil: such an order's stream starts empty and waits.
	Accepted func(ctx context.Context, o order.Order) (webhook.Event, error)
	// CatchUps bounds the outbox reads in flight at once (a Redis restart
	// makes every stream of a shard read): default 16.
	CatchUps int
	// ReadTimeout bounds one outbox read: default 3 s.
	ReadTimeout time.Duration
}

// Orders opens order streams on a hub.
type Orders struct {
	hub    *Hub
	orders OrderGetter
	outbox Outbox
	cfg    OrdersConfig
	sem    chan struct{}
}

// NewOrders returns the order streams' service.
func NewOrders(hub *Hub, orders OrderGetter, outbox Outbox, cfg OrdersConfig) *Orders {
	if cfg.CatchUps <= 0 {
		cfg.CatchUps = 16
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 3 * time.Second
	}
	return &Orders{hub: hub, orders: orders, outbox: outbox, cfg: cfg, sem: make(chan struct{}, cfg.CatchUps)}
}

// OrderStream is one client's stream of one order.
type OrderStream struct {
	o       *Orders
	sub     *Subscription
	no      string
	group   string
	cur     Cursor
	pending []Item
	// what has been sent: the stream ends at the order's final state
	paid, groupSucceeded, final bool
}

// Open opens userID's stream of order no from cursor from: subscribed
// first, then the outbox read, so that nothing committed in between is
// missed. Another user's order is order.ErrNotFound, as its GET answers.
func (o *Orders) Open(ctx context.Context, no string, userID int64, from Cursor) (*OrderStream, error) {
	ord, err := o.orders.GetAcked(ctx, no, userID)
	if err != nil {
		return nil, err
	}
	sub, err := o.hub.Subscribe(OrderTopic(ord.No))
	if err != nil {
		return nil, err
	}
	s := &OrderStream{o: o, sub: sub, no: ord.No, group: ord.GroupID, cur: from}
	// Every event from the first: those the client holds (up to from) are
	// not sent again, but say where the order stands (a "2" is paid or
	// cancelled: the events tell which, and whether the stream is done).
	if err := s.catchUp(ctx, Cursor{}); err != nil {
		sub.Close()
		return nil, err
	}
	if !slices.ContainsFunc(s.pending, func(it Item) bool { return it.Subject == ord.No }) && o.cfg.Accepted != nil {
		acc := ord
		acc.Status = order.PendingPayment
		e, err := o.cfg.Accepted(ctx, acc)
		if err != nil {
			sub.Close()
			return nil, err
		}
		s.pending = append(s.pending, ItemOf(e, OrderTopic(ord.No)))
	}
	return s, nil
}

// Close ends the stream's subscription.
func (s *OrderStream) Close() { s.sub.Close() }

// Cursor is where the stream stands: the SSE id of the last item Next
// returned.
func (s *OrderStream) Cursor() Cursor { return s.cur }

// ErrEnded: the order reached its final state and the stream has sent it.
var ErrEnded = errors.New("stream: the order is final")

// Next returns the next item to send, in order and never one the client
// holds. ok is false when tick fires first (time for a heartbeat). It ends
// with ErrEnded after the order's final state — cancelled, refunded, or
// paid with no group still to decide (a paid order can still be refunded
// later, by the shop: a new stream, or a poll, shows it; a group member's
// paid order waits for its group: success ends it, failure's refund does)
// — with ErrDropped
// or ErrClosed from the hub, or with ctx's error.
func (s *OrderStream) Next(ctx context.Context, tick <-chan time.Time) (it Item, ok bool, err error) {
	for {
		for len(s.pending) > 0 {
			it := s.pending[0]
			s.pending = s.pending[1:]
			if !it.durable && it.Subject == s.no && it.Seq > s.cur.Order+1 {
				// One before it is missing (two workers' batches published
				// out of order): it is committed, since events are
				// published after their commit, so the outbox has both.
				s.pending = s.pending[:0]
				if err := s.catchUp(ctx, s.cur); err != nil {
					return Item{}, false, err
				}
				continue
			}
			if s.take(it) {
				return it, true, nil
			}
		}
		if s.final {
			return Item{}, false, ErrEnded
		}
		select {
		case it := <-s.sub.Items():
			s.pending = append(s.pending, it)
		case <-s.sub.Resync():
			if err := s.catchUp(ctx, s.cur); err != nil {
				return Item{}, false, err
			}
		case <-s.sub.Done():
			return Item{}, false, s.sub.Err()
		case <-tick:
			return Item{}, false, nil
		case <-ctx.Done():
			return Item{}, false, ctx.Err()
		}
	}
}

// take notes the order's state it reports, advances the cursor past it,
// and reports whether it is new to the client (an event the client holds
// says where the order stands all the same).
func (s *OrderStream) take(it Item) bool {
	fresh := false
	switch {
	case it.Subject == s.no:
		switch webhook.Type(it.Name) {
		case webhook.OrderPaid:
			s.paid = true
		case webhook.OrderCancelled, webhook.OrderRefunded:
			s.final = true
		}
		if fresh = it.Seq > s.cur.Order; fresh {
			s.cur.Order = it.Seq
		}
	case strings.HasPrefix(it.Name, "group.") && (s.group == "" || it.Subject == s.group):
		// A group that failed refunds its paid members (order.refunded
		// follows): only success makes a paid member's order final.
		s.group = it.Subject
		s.groupSucceeded = webhook.Type(it.Name) == webhook.GroupSucceeded
		if fresh = it.Seq > s.cur.Group; fresh {
			s.cur.Group = it.Seq
		}
	}
	if s.paid && (s.group == "" || s.groupSucceeded) {
		s.final = true
	}
	return fresh
}

// catchUp reads from the outbox the events after from: the order's and
// its group's, merged by time.
func (s *OrderStream) catchUp(ctx context.Context, from Cursor) error {
	o := s.o
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-o.sem }()
	ctx, cancel := context.WithTimeout(ctx, o.cfg.ReadTimeout)
	defer cancel()
	events, err := o.outbox.Of(ctx, s.no, from.Order)
	if err != nil {
		return err
	}
	if s.group != "" {
		g, err := o.outbox.Of(ctx, s.group, from.Group)
		if err != nil {
			return err
		}
		events = append(events, g...)
		slices.SortStableFunc(events, func(a, b webhook.Event) int { return a.At.Compare(b.At) })
	}
	for _, e := range events {
		it := ItemOf(e, OrderTopic(s.no))
		it.durable = true
		s.pending = append(s.pending, it)
	}
	return nil
}
