package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
)

// Tasks is the background work an order sets off (asynq in production).
type Tasks interface {
	// Accepted queues a new order's payment timeout (due at payBy) and then
	// its first persistence, in that order: the sync takes the order out of
	// the outbox, where the reconciler would otherwise find it, so a sync
	// queued without its timeout could leave an unpaid order holding stock
	// for ever.
	Accepted(ctx context.Context, no string, payBy time.Time) error
	// Sync records order no's current state in MySQL; fence 0 is its first
	// persistence, a status change passes its fence.
	Sync(ctx context.Context, no string, fence int64) error
	// ExpireAt cancels order no at at if it is still unpaid.
	ExpireAt(ctx context.Context, no string, at time.Time) error
	// SettleAt settles group gid at its deadline at.
	SettleAt(ctx context.Context, gid string, at time.Time) error
	// SyncGroup records group gid's current state in MySQL.
	SyncGroup(ctx context.Context, gid string) error
}

// SoldOut is the local sold-out flag (stock.Store).
type SoldOut interface {
	SoldOut(activityID int64) bool
	MarkSoldOut(activityID int64)
}

// Config tunes the Service. The zero value gives the defaults in the comments.
type Config struct {
	// NoUserLock skips the per-(activity, user) lock: only for measuring
	// what it costs (the accept script alone still never oversells or
	// breaks the limit; the lock makes a user's concurrent requests, e.g.
	// retries with one Idempotency-Key, strictly one after the other).
	NoUserLock bool
	// UserLockTTL is the per-user lock's ttl (renewed while held). Default 5s.
	UserLockTTL time.Duration
	// LockWait bounds how long a request waits for a user or order lock
	// held by another request. Default 3s.
	LockWait time.Duration
}

// Service places orders and moves them on.
type Service struct {
	store   *Redis
	locks   lock.Locker
	tasks   Tasks
	soldOut SoldOut
	cfg     Config
	log     *slog.Logger
}

// NewService returns the order service. soldOut may be nil.
func NewService(store *Redis, locks lock.Locker, tasks Tasks, soldOut SoldOut, cfg Config, log *slog.Logger) *Service {
	if cfg.UserLockTTL <= 0 {
		cfg.UserLockTTL = 5 * time.Second
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = 3 * time.Second
	}
	return &Service{store: store, locks: locks, tasks: tasks, soldOut: soldOut, cfg: cfg, log: log}
}

// PlaceRequest is one shopper's order.
type PlaceRequest struct {
	ActivityID     int64
	UserID         int64
	Quantity       int
	IdempotencyKey string // optional
}

func (r PlaceRequest) validate() error {
	switch {
	case r.ActivityID <= 0:
		return fmt.Errorf("%w: activity id %d", ErrInvalid, r.ActivityID)
	case r.UserID <= 0:
		return fmt.Errorf("%w: user id %d", ErrInvalid, r.UserID)
	case r.Quantity < 1 || r.Quantity > MaxQuantity:
		return fmt.Errorf("%w: quantity must be between 1 and %d", ErrInvalid, MaxQuantity)
	case r.IdempotencyKey != "" && !ValidIdempotencyKey(r.IdempotencyKey):
		return fmt.Errorf("%w: Idempotency-Key must be 1-64 printable ASCII characters", ErrInvalid)
	}
	return nil
}

// lockUser takes the per-(activity, user) lock, unless configured off; the
// returned func releases it. It is taken WithoutFence: nothing downstream
// checks a fence for it (the accept script is atomic on its own), and a
// fence counter kept for a day per user of every sale cost Redis 149 bytes
// per participant (docs/benchmarks.md).
func (s *Service) lockUser(ctx context.Context, activityID, userID int64) (func(), error) {
	if s.cfg.NoUserLock {
		return func() {}, nil
	}
	l, err := s.obtain(ctx, "order-user:"+strconv.FormatInt(activityID, 10)+":"+strconv.FormatInt(userID, 10),
		s.cfg.UserLockTTL, "order-user", lock.WithoutFence())
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release(context.WithoutCancel(ctx)) }, nil
}

// Place accepts an order into Redis, or says why not (activity.ErrSoldOut,
// ErrLimitExceeded, ErrNotStarted, ErrEnded, ErrNotOnSale, ErrInvalid,
// ErrBusy, ErrUnavailable). A request repeating an Idempotency-Key returns
// the order the first one made. The order is in Redis, with its outbox
// entry, when Place returns; recording it in MySQL and cancelling it if
// unpaid are queued, and if queueing fails the worker's reconciler finds it
// in the outbox.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Order, error) {
	if err := r.validate(); err != nil {
		return Order{}, err
	}
	if s.soldOut != nil && s.soldOut.SoldOut(r.ActivityID) && r.IdempotencyKey == "" {
		return Order{}, activity.ErrSoldOut // no Redis round trip for the crowd after the sale
	}
	unlock, err := s.lockUser(ctx, r.ActivityID, r.UserID)
	if err != nil {
		return Order{}, err
	}
	defer unlock()
	acc, err := s.store.Accept(ctx, NewNo(r.ActivityID), r.ActivityID, r.UserID, r.Quantity, r.IdempotencyKey)
	if err != nil {
		if errors.Is(err, activity.ErrSoldOut) && acc.remaining == 0 && s.soldOut != nil {
			s.soldOut.MarkSoldOut(r.ActivityID)
		}
		return Order{}, err
	}
	o := acc.order
	if !acc.replay {
		if acc.remaining == 0 && s.soldOut != nil {
			s.soldOut.MarkSoldOut(r.ActivityID)
		}
		s.queueOrder(ctx, o)
	}
	return o, nil
}

// queue runs an enqueue, logging a failure: the order is safe in Redis and
// its outbox, and the reconciler queues it again.
func (s *Service) queue(ctx context.Context, no string, enqueue func(context.Context) error) {
	if err := enqueue(context.WithoutCancel(ctx)); err != nil && s.log != nil {
		s.log.Warn("order accepted but its task was not queued; the reconciler will", "order", no, "err", err)
	}
}

func (s *Service) obtain(ctx context.Context, key string, ttl time.Duration, family string, opts ...lock.Option) (*lock.Lock, error) {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.LockWait)
	defer cancel()
	l, err := s.locks.Obtain(wctx, key, ttl, append(opts, lock.WithFamily(family))...)
	switch {
	case err == nil:
		return l, nil
	case errors.Is(err, lock.ErrCanceled) && ctx.Err() == nil:
		return nil, fmt.Errorf("%w: %s", ErrBusy, key)
	case errors.Is(err, lock.ErrCanceled):
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("%w: lock: %w", ErrUnavailable, err)
}

// Get returns order no if it belongs to userID, else ErrNotFound.
func (s *Service) Get(ctx context.Context, no string, userID int64) (Order, error) {
	o, err := s.store.Get(ctx, no)
	if err != nil {
		return Order{}, err
	}
	if o.UserID != userID {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	return o, nil
}

// Pay marks userID's order paid (payment itself is simulated). Paying after
// the payment time, or an order that is not pending payment, is ErrConflict.
func (s *Service) Pay(ctx context.Context, no string, userID int64) (Order, error) {
	return s.transition(ctx, no, "pay", userID)
}

// Cancel cancels userID's unpaid order and returns its units to the sale.
func (s *Service) Cancel(ctx context.Context, no string, userID int64) (Order, error) {
	return s.transition(ctx, no, "cancel", userID)
}

// Expire cancels order no if its payment time is over and it is unpaid; an
// order paid or cancelled meanwhile is left as it is (nil error).
func (s *Service) Expire(ctx context.Context, no string) (Order, error) {
	o, err := s.transition(ctx, no, "expire", 0)
	if errors.Is(err, ErrConflict) {
		return o, nil
	}
	return o, err
}

// transition runs one status change under the order's lock: the lock's
// fencing token goes into Redis with the change and, through the sync task,
// into MySQL, where a change with a smaller token than the row's is ignored.
// userID 0 is the system.
func (s *Service) transition(ctx context.Context, no, what string, userID int64) (Order, error) {
	o, err := s.store.Get(ctx, no)
	if err != nil {
		return Order{}, err
	}
	if userID != 0 && o.UserID != userID {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	l, err := s.obtain(ctx, "order:"+no, 5*time.Second, "order")
	if err != nil {
		return Order{}, err
	}
	defer l.Release(context.WithoutCancel(ctx)) //nolint:errcheck // a failed release expires
	code, status, err := s.store.Transition(ctx, no, o.GroupID, what, l.Fence(), userID)
	if err != nil {
		return Order{}, err
	}
	switch code {
	case transDone:
		s.queue(ctx, no, func(ctx context.Context) error { return s.tasks.Sync(ctx, no, l.Fence()) })
		if o.GroupID != "" {
			s.queue(ctx, no, func(ctx context.Context) error { return s.tasks.SyncGroup(ctx, o.GroupID) })
		}
	case transNotFound:
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	case transNotOpen:
		return Order{}, fmt.Errorf("%w: the order is %s", ErrConflict, status)
	case transOverdue:
		return Order{}, fmt.Errorf("%w: the payment time is over", ErrConflict)
	case transNotDue:
		return Order{}, fmt.Errorf("%w: the payment time is not over yet", ErrNotDue)
	case transStale:
		return Order{}, fmt.Errorf("%w: a newer change was applied", ErrConflict)
	case transNotFail:
		return Order{}, fmt.Errorf("%w: the group has not failed", ErrConflict)
	case transClosed:
		return Order{}, fmt.Errorf("%w: it failed or its deadline passed", ErrGroupClosed)
	}
	return s.store.Get(ctx, no)
}

// ErrNotDue: an expiry ran before the order's payment time was over (a
// clock or an early task); it is retried.
var ErrNotDue = errors.New("order: not due")
