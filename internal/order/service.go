package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/memo"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Config tunes the Service. The zero value gives the defaults in the comments.
type Config struct {
	// NoUserLock skips the per-(activity, user) lock: only for measuring
	// what it costs (the accept script alone still never oversells or
	// breaks the limit; the lock makes a user's concurrent requests, e.g.
	// retries with one Idempotency-Key, strictly one after the other).
	NoUserLock bool
	// HoldUserLock takes the per-user lock for every order, as Obtain
	// does, instead of deferring it to the accept (LockOptions.Defer),
	// which takes it only when someone holds it: only for measuring what
	// deferring saves. Same outcomes either way.
	HoldUserLock bool
	// UserLockTTL is the per-user lock's ttl (renewed while held). Default 5s.
	UserLockTTL time.Duration
	// OrderLockTTL is the per-order lock's ttl (renewed while held). Default 5s.
	OrderLockTTL time.Duration
	// LockWait bounds how long a request waits for a user or order lock
	// held by another request. Default 3s.
	LockWait time.Duration
	// UserRPS is how many orders (and groups opened or joined) a second a
	// user may ask for: the per-user rate limit, on the same budget as the
	// user's other requests (the HTTP layer's limit, with the same
	// RateLimiter). An order's is charged in its accept's step
	// (UserTurn.Limit), a group's before its lock (Deps.Limits). 0: none.
	UserRPS int
	// Tracer traces each order's accept (the Redis script's run, batched
	// with others'); nil: none (internal/tracing).
	Tracer trace.Tracer
}

// Deps are the Service's collaborators (ports.go).
type Deps struct {
	Store   Store
	Locks   Locker
	Tasks   Tasks
	Records Records // nil: orders gone from the Store are not found
	SoldOut SoldOut // nil: no local sold-out flag
	// Payments is told of the changes that concern the provider's payment
	// (payment.Service); nil: none.
	Payments Payments
	// Limits charges the per-user rate limit of group requests
	// (Config.UserRPS); nil: they are not limited here.
	Limits RateLimiter
	Log    *slog.Logger
}

// Service places orders and moves them on.
type Service struct {
	deps Deps
	cfg  Config
}

// NewService returns the order service.
func NewService(d Deps, cfg Config) *Service {
	if cfg.UserLockTTL <= 0 {
		cfg.UserLockTTL = 5 * time.Second
	}
	if cfg.OrderLockTTL <= 0 {
		cfg.OrderLockTTL = 5 * time.Second
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = 3 * time.Second
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	return &Service{deps: d, cfg: cfg}
}

// PlaceRequest is one shopper's order, or their place in a group.
type PlaceRequest struct {
	ActivityID     int64
	UserID         int64
	Quantity       int
	IdempotencyKey string // optional
	// Item is the SKU of the sale's item ordered; "" for the sale's one
	// item (a sale of several refuses it: ErrItemRequired). A group's
	// joiners name none: they get the group's item.
	Item string
}

// Validate checks the request's own rules: a refusal of kind ErrInvalid
// naming what is wrong, or nil.
func (r PlaceRequest) Validate() error {
	switch {
	case r.ActivityID <= 0:
		return refusal.New(ErrInvalid, "activity id %d is not positive", r.ActivityID)
	case r.UserID <= 0:
		return refusal.New(ErrInvalid, "user id %d is not positive", r.UserID)
	case r.Quantity < 1 || r.Quantity > MaxQuantity:
		return ErrBadQuantity
	case r.IdempotencyKey != "" && !ValidIdempotencyKey(r.IdempotencyKey):
		return refusal.New(ErrInvalid, "Idempotency-Key must be 1-64 printable ASCII characters")
	case r.Item != "" && !activity.ValidSKU(r.Item):
		// Refused before Redis: no ':' or '|' reaches a field or a record.
		return refusal.OfField(ErrInvalid, "item", "item %q is not an item's sku: 1-%d letters, digits, '.', '_' or '-'",
			r.Item, activity.MaxSKULen)
	}
	return nil
}

// RefusedHere reports whether this process refuses an order for activityID
// without asking Redis and without knowing who asks: it saw the sale sell
// out a moment ago. A request with an Idempotency-Key is not refused
// here: it may be the retry of an order that was accepted, which Place
// looks up (one read, not the order's script). The HTTP layer asks before
// it spends anything on the request (rate limits, the token); Place asks
// again.
func (s *Service) RefusedHere(activityID int64, idempotencyKey string) bool {
	return idempotencyKey == "" && s.soldOutHere(activityID)
}

// soldOutHere reports whether this process saw activityID sell out a moment
// ago.
func (s *Service) soldOutHere(activityID int64) bool {
	return s.deps.SoldOut != nil && s.deps.SoldOut.SoldOut(activityID)
}

// itemSoldOutHere reports whether this process saw item sku of activityID
// sell out a moment ago ("": none named, no).
func (s *Service) itemSoldOutHere(activityID int64, sku string) bool {
	return sku != "" && s.deps.SoldOut != nil && s.deps.SoldOut.ItemSoldOut(activityID, sku)
}

// soldOut is the refusal of r as sold out: the sale's, or of the item it
// names.
func soldOut(r PlaceRequest) error {
	if r.Item == "" {
		return activity.ErrSoldOut
	}
	return refusal.OfField(activity.ErrSoldOut, "item", "item %q is sold out", r.Item)
}

// Place accepts an order into Redis, or says why not (activity.ErrSoldOut,
// ErrLimitExceeded, ErrNotStarted, ErrEnded, ErrNotOnSale, ErrInvalid,
// ErrWrongType, ErrBusy, ErrUnavailable). A request repeating an
// Idempotency-Key returns the order the first one made. The order is in
// Redis, with its outbox entry, when Place returns; recording it in MySQL
// and cancelling it if unpaid are queued, and if queueing fails the
// worker's reconciler finds it in the outbox.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Order, error) {
	if err := r.Validate(); err != nil {
		return Order{}, err
	}
	if s.soldOutHere(r.ActivityID) || s.itemSoldOutHere(r.ActivityID, r.Item) {
		// No order script for the crowd after the sale (or the item): a
		// key's retry of an order accepted before is answered from its
		// record, the rest are refused.
		return s.replayAfterSellOut(ctx, r)
	}
	// The user's turn (the per-user lock, the rate limit) and the accept
	// are one step in Redis where the store can: when nobody holds the
	// lock, one script checks that, charges the limit and accepts; when
	// someone does, the store waits for it, at most LockWait, as Obtain
	// would. A number drawn twice (all but impossible) is retried without
	// the turn: the accept is atomic on its own, and the limit was charged.
	// Its attributes are set only on a span that records: as start
	// options they were built for every order with tracing off too (about
	// 1% of the api's allocations in the fresh-shopper profile; the
	// samplers here read no attributes).
	ctx, span := s.cfg.Tracer.Start(ctx, "order.accept")
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("flashsale.activity", r.ActivityID), attribute.Int("flashsale.quantity", r.Quantity))
	}
	acc, err := s.deps.Store.Accept(ctx, NewNo(r.ActivityID), r, s.userTurn(r))
	if errors.Is(err, ErrLockWait) {
		err = s.lockError(ctx, err, userBusy)
	}
	if errors.Is(err, ErrNumberTaken) {
		acc, err = retryTaken(func() (Accepted, error) { return s.deps.Store.Accept(ctx, NewNo(r.ActivityID), r, UserTurn{}) })
	}
	if span.IsRecording() {
		endAccept(span, acc, err)
	}
	if (err == nil || errors.Is(err, activity.ErrSoldOut)) && !acc.Replay && s.deps.SoldOut != nil {
		if acc.Remaining == 0 {
			s.deps.SoldOut.MarkSoldOut(r.ActivityID)
		}
		if acc.ItemRemaining == 0 && r.Item != "" {
			s.deps.SoldOut.MarkItemSoldOut(r.ActivityID, r.Item)
		}
	}
	if err != nil {
		return Order{}, err
	}
	if !acc.Replay || !acc.Order.Persisted {
		// A replay's first attempt may have failed before queueing its
		// tasks (answered 503 when the replicas did not confirm in time, or
		// its api died): queued again, they are harmless (an expiry of a
		// paid order changes nothing, a sync writes the order as it is),
		// and the order does not wait for the reconciler.
		s.queueOrder(ctx, acc.Order)
	}
	return acc.Order, nil
}

// endAccept ends an accept's span with its outcome: the order's number,
// or the refusal.
func endAccept(span trace.Span, acc Accepted, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("flashsale.refused", err.Error()))
		if errors.Is(err, ErrUnavailable) {
			span.SetStatus(codes.Error, err.Error())
		}
	} else {
		span.SetAttributes(attribute.String("flashsale.order", acc.Order.No), attribute.Bool("flashsale.replay", acc.Replay))
	}
	span.End()
}

// replayAfterSellOut answers an order for a sale this process saw sell out:
// the order r's Idempotency-Key made before, if it made one, else
// activity.ErrSoldOut.
func (s *Service) replayAfterSellOut(ctx context.Context, r PlaceRequest) (Order, error) {
	if r.IdempotencyKey == "" {
		return Order{}, soldOut(r)
	}
	o, err := s.deps.Store.Keyed(ctx, r)
	if errors.Is(err, ErrNotFound) {
		return Order{}, soldOut(r)
	}
	if err != nil {
		return Order{}, err
	}
	if !o.Persisted {
		s.queueOrder(ctx, o) // as for any replay: see Place
	}
	return o, nil
}

// userTurn is r's turn in Store.Accept: the per-user lock unless
// configured off, the rate limit if set.
func (s *Service) userTurn(r PlaceRequest) UserTurn {
	user := strconv.FormatInt(r.UserID, 10)
	return UserTurn{
		Lock: !s.cfg.NoUserLock, Key: user, Options: userLockOptions(r.ActivityID),
		Hold: s.cfg.HoldUserLock, TTL: s.cfg.UserLockTTL, Wait: s.cfg.LockWait, Limit: s.userLimit(user),
	}
}

// userLimit is the rate limit (Config.UserRPS) of user (its id, written
// out), or nil for none.
func (s *Service) userLimit(user string) *RateLimit {
	if s.cfg.UserRPS <= 0 {
		return nil
	}
	return &RateLimit{Scope: "user", Who: user, PerSecond: s.cfg.UserRPS}
}

// retryTaken runs enter, which draws a new number each time, again while
// the number it drew was taken: three draws of 80 random bits.
func retryTaken(enter func() (Accepted, error)) (Accepted, error) {
	acc, err := enter()
	for i := 0; i < 2 && errors.Is(err, ErrNumberTaken); i++ {
		acc, err = enter()
	}
	return acc, err
}

// userBusy is the refusal's message when a user's other request held the
// per-user lock for longer than LockWait.
const userBusy = "another order of yours in this sale is being placed; try again"

// lockUser charges a group request to the user's rate limit
// (Config.UserRPS, Deps.Limits) and takes the per-(activity, user) lock for
// it, unless configured off (nil then). The limit is charged first, once:
// over it, a *RateLimited and no lock. A limiter that fails lets the
// request through: the limit protects the service, it must not stop it
// with Redis. The lock is taken without a fence: nothing downstream checks
// one (the group scripts are atomic on their own), and a fence counter
// kept for a day per user of every sale cost Redis 149 bytes per
// participant (docs/benchmarks.md).
func (s *Service) lockUser(ctx context.Context, activityID, userID int64) (Lock, error) {
	user := strconv.FormatInt(userID, 10)
	if l := s.userLimit(user); l != nil && s.deps.Limits != nil {
		allowed, retryAfter, err := s.deps.Limits.Allow(ctx, l.Scope, l.Who, l.PerSecond)
		if err == nil && !allowed {
			return nil, &RateLimited{PerSecond: l.PerSecond, RetryAfter: retryAfter}
		}
	}
	if s.cfg.NoUserLock {
		return nil, nil
	}
	return s.obtain(ctx, user, s.cfg.UserLockTTL, userLockOptions(activityID), userBusy)
}

// userLockOptions are the per-(activity, user) lock's: a set per sale (a
// table of internal/lock: the obtains and releases of concurrent requests
// cost Redis a field each), no fence. The Store takes the same lock for
// an order (UserTurn).
func userLockOptions(activityID int64) LockOptions { return userLocks.Get(activityID) }

// userLocks remembers each sale's userLockOptions: built for every order
// before (its set's name), a few allocations of a fresh shopper's each.
var userLocks = memo.New(1024, func(activityID int64) LockOptions {
	return LockOptions{Family: "order-user", NoFence: true, Set: "order-user:" + strconv.FormatInt(activityID, 10)}
})

// release releases l if there is one, as a follow-up of the request
// (FollowUp: ctx may have ended already). A release that fails leaves the
// lock to expire (its ttl), which is safe; one that waited on a frozen
// Redis with no deadline of its own would hold the request's answer long
// past REQUEST_TIMEOUT.
func release(ctx context.Context, l Lock) {
	if l != nil {
		rctx, cancel := FollowUp(ctx)
		defer cancel()
		_ = l.Release(rctx)
	}
}

// FollowUpGrace is how long past a request's deadline its follow-ups may
// take (FollowUp).
const FollowUpGrace = 500 * time.Millisecond

// FollowUp is the context for what follows a change already made — its
// tasks queued, the payment provider told, a lock released: not cancelled
// with the request (they are to be done even when its client has gone),
// but done by the request's deadline and FollowUpGrace more (a second and
// the grace from now without one). Each is best effort with a backstop
// (the reconciler, the provider's redelivery, a lock's ttl). Found by the
// network soak (issue 28): with an api's Redis link silent, a pay or a
// cancel whose change was made waited for its follow-ups with no deadline
// — three go-redis tries of a 3-s read — and was answered after 10 s, far
// past REQUEST_TIMEOUT.
func FollowUp(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(time.Second)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), d.Add(FollowUpGrace))
}

// queueOrder queues a new order's payment timeout and persistence.
func (s *Service) queueOrder(ctx context.Context, o Order) {
	s.queue(ctx, o.No, func(ctx context.Context) error { return s.deps.Tasks.ExpireThenSync(ctx, o.No, o.PayBy) })
}

// queue runs an enqueue, logging a failure: the order is safe in Redis and
// its outbox, and the reconciler queues it again.
func (s *Service) queue(ctx context.Context, no string, enqueue func(context.Context) error) {
	if _, ok := s.deps.Tasks.(Buffered); !ok {
		fctx, cancel := FollowUp(ctx)
		defer cancel()
		ctx = fctx
	}
	if err := enqueue(ctx); err != nil {
		s.deps.Log.Warn("order accepted but its task was not queued; the reconciler will", "order", no, "err", err)
	}
}

// obtain takes a lock, waiting at most LockWait: waiting longer is
// ErrBusy (with the message busy), the caller's own end its context's
// error, anything else ErrUnavailable.
func (s *Service) obtain(ctx context.Context, key string, ttl time.Duration, o LockOptions, busy string) (Lock, error) {
	wctx, cancel := s.lockWait(ctx)
	defer cancel()
	l, err := s.deps.Locks.Obtain(wctx, key, ttl, o)
	if err != nil {
		return nil, s.lockError(ctx, err, busy)
	}
	return l, nil
}

// lockWait bounds a wait for a lock by LockWait. The request's own deadline
// is as short (REQUEST_TIMEOUT and LockWait are both 3 s by default): then
// a context and timer of its own for the wait, one an order, would change
// nothing, and ctx is returned as it is.
func (s *Service) lockWait(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.cfg.LockWait {
		return context.WithTimeout(ctx, s.cfg.LockWait)
	}
	return ctx, func() {}
}

// lockError is what a failed wait for a lock (err) tells the caller of a
// request whose context is ctx: the rate limit's refusal as it is, the
// request's own end, the lock's store not answering (ErrUnavailable),
// ErrBusy with the message busy when LockWait ran out on a holder, else
// ErrUnavailable. The request's own end is its context's error, and an
// ErrLockWait wrapping the wait's: what the request waited on when it
// ended — a holder, or the lock's store not answering (ErrUnavailable) —
// which the API's 503 names.
func (s *Service) lockError(ctx context.Context, err error, busy string) error {
	var limited *RateLimited
	switch {
	case errors.As(err, &limited):
		return err
	case endOf(ctx) != nil:
		return fmt.Errorf("%w (%w): %w", endOf(ctx), ErrLockWait, err)
	case errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return refusal.New(ErrBusy, "%s", busy)
	}
	return fmt.Errorf("%w: lock: %w", ErrUnavailable, err)
}

// endOf is ctx's error; or context.DeadlineExceeded once its deadline has
// passed, which a call's error can tell a moment before ctx does (go-redis
// sets the socket's deadline from it); nil while ctx runs.
func endOf(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// Get returns order no if it belongs to userID (0: the system asks,
// whoever's it is), else ErrNotFound: from Redis while it keeps the order,
// then from MySQL's record.
func (s *Service) Get(ctx context.Context, no string, userID int64) (Order, error) {
	o, err := s.deps.Store.Get(ctx, no)
	if errors.Is(err, ErrNotFound) && s.deps.Records != nil {
		o, err = s.deps.Records.Get(ctx, no)
	}
	if err != nil {
		return Order{}, err
	}
	if userID != 0 && o.UserID != userID {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	return o, nil
}

// GetAcked is Get read with the replicas' acknowledgement (when
// configured, REDIS_ACK_REPLICAS): what it tells the shopper — the order's
// GET, a pay's answer — a failover cannot take back. Without it, a primary
// resumed from a pause after its replica was promoted answers, until it is
// demoted, with writes the demotion then drops (the fault soak caught a
// shopper told "paid" that way).
func (s *Service) GetAcked(ctx context.Context, no string, userID int64) (Order, error) {
	o, err := s.deps.Store.GetAcked(ctx, no)
	if errors.Is(err, ErrNotFound) && s.deps.Records != nil {
		o, err = s.deps.Records.Get(ctx, no)
	}
	if err != nil {
		return Order{}, err
	}
	if userID != 0 && o.UserID != userID {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	return o, nil
}

// List returns page (from 1) of pageSize of userID's recorded orders, newest
// first, and how many there are. Only orders already in MySQL are listed.
func (s *Service) List(ctx context.Context, userID int64, page, pageSize int) ([]Order, int64, error) {
	if s.deps.Records == nil {
		return nil, 0, nil
	}
	return s.deps.Records.ListByUser(ctx, userID, page, pageSize)
}

// ConfirmPaid marks order no paid by the provider's payment paymentID: the
// provider confirmed the money (a verified webhook; payment.Service). Only
// the provider's word pays an order: the shopper's app starts a payment
// (payment.Service.Start), never marks one paid. Paying after the payment
// time, or an order that is not pending payment, is ErrConflict; into a
// group that failed or closed, ErrGroupClosed — the money is then given
// back (payment.Service).
func (s *Service) ConfirmPaid(ctx context.Context, no, paymentID string) (Order, error) {
	return s.transitionNo(ctx, no, Pay, 0, paymentID)
}

// Pay is ConfirmPaid of order o as just read from Redis (Get; its number
// and group are what the change needs), which saves reading it again: the
// payment service reads it to check the money first.
func (s *Service) Pay(ctx context.Context, o Order, paymentID string) (Order, error) {
	return s.transition(ctx, o, Pay, 0, paymentID)
}

// Cancel cancels userID's unpaid order and returns its units to the sale.
func (s *Service) Cancel(ctx context.Context, no string, userID int64) (Order, error) {
	return s.transitionNo(ctx, no, Cancel, userID, "")
}

// Expire cancels order no if its payment time is over and it is unpaid; an
// order paid or cancelled meanwhile is left as it is (nil error). A stale
// refusal (ErrStale) is returned: the order may still be unpaid, and the
// expiry is retried.
func (s *Service) Expire(ctx context.Context, no string) (Order, error) {
	o, err := s.transitionNo(ctx, no, Expire, 0, "")
	if errors.Is(err, ErrConflict) {
		return o, nil
	}
	return o, err
}

// transitionNo reads order no from Redis — another user's is ErrNotFound
// (userID 0: the system, whoever's) — and runs transition on it.
func (s *Service) transitionNo(ctx context.Context, no string, a Action, userID int64, paymentID string) (Order, error) {
	o, err := s.deps.Store.Get(ctx, no)
	if err != nil {
		return Order{}, err
	}
	if userID != 0 && o.UserID != userID {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	return s.transition(ctx, o, a, userID, paymentID)
}

// transition runs one status change of order o (as read from Redis) under
// the order's lock: the lock's fencing token goes into Redis with the
// change and, through the sync task, into MySQL, where a change with a
// smaller token than the row's is ignored. userID 0 is the system;
// paymentID is a pay's payment. Then the payment provider is told what
// concerns it (Deps.Payments). It returns the order as the change left it.
func (s *Service) transition(ctx context.Context, o Order, a Action, userID int64, paymentID string) (Order, error) {
	no := o.No
	l, err := s.obtain(ctx, "order:"+no, s.cfg.OrderLockTTL, LockOptions{Family: "order"},
		"another request for this order is in progress; try again")
	if err != nil {
		return Order{}, err
	}
	defer release(ctx, l)
	after, err := s.deps.Store.Transition(ctx, Change{No: no, GroupID: o.GroupID, Action: a, Fence: l.Fence(), UserID: userID,
		PaymentID: paymentID})
	if err != nil {
		return Order{}, err
	}
	s.tellPayments(ctx, no, a)
	s.queue(ctx, no, func(ctx context.Context) error { return s.deps.Tasks.Sync(ctx, no, l.Fence()) })
	if o.GroupID != "" {
		s.queue(ctx, no, func(ctx context.Context) error { return s.deps.Tasks.SyncGroup(ctx, o.GroupID) })
	}
	return after, nil
}

// tellPayments tells the payment provider what a change means for the
// order's payment: not to take money any more for an order that cannot be
// paid, or to give back a refunded order's. A failure is logged: the
// change stands, late money is refunded when it comes, and the worker's
// sync of a refunded order queues its refund again (tasks.Worker).
func (s *Service) tellPayments(ctx context.Context, no string, a Action) {
	if s.deps.Payments == nil {
		return
	}
	fctx, cancel := FollowUp(ctx)
	defer cancel()
	var err error
	switch a {
	case Cancel, Expire, SettleUnpaid:
		err = s.deps.Payments.Abandon(fctx, no)
	case Refund:
		err = s.deps.Payments.RefundOrder(fctx, no)
	}
	if err != nil {
		s.deps.Log.Warn("order changed, but its payment provider was not told", "order", no, "action", a, "err", err)
	}
}
