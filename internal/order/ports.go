package order

import (
	"context"
	"time"
)

// What the Service needs from the outside, declared here and implemented by
// the adapters: Store by internal/redisstore (Orders), Tasks by
// internal/tasks (the api's Relay, the worker's durable Queue), Records by
// internal/mysqlstore, Locker by redisstore.Locks over internal/lock,
// RateLimiter by redisstore.Limiter, SoldOut by internal/stock.

// Store keeps live orders and groups (Redis). Each method that decides
// something decides it atomically, in one script.
type Store interface {
	// Accept accepts a new flash-sale order numbered no, or refuses it:
	// the sale's refusals (activity.ErrSoldOut, ErrLimitExceeded,
	// ErrNotStarted, ErrEnded, ErrNotOnSale) or ErrWrongType. A request
	// whose Idempotency-Key named an order before gets that order back,
	// with Replay set, and nothing else happens. Remaining is the units the
	// sale has left, refused or not. ErrNumberTaken: no is in use.
	//
	// t is the user's turn: the per-user lock the accept runs under and
	// the rate limit it charges, both in the same atomic step as the
	// accept where the Store can (UserTurn). Over the limit, a
	// *RateLimited and nothing else happens; a wait for the lock that
	// fails is an ErrLockWait.
	Accept(ctx context.Context, no string, r PlaceRequest, t UserTurn) (Accepted, error)
	// Keyed returns the order a user's Idempotency-Key made in a sale
	// (PlaceRequest's ActivityID, UserID and IdempotencyKey), without
	// deciding anything; ErrNotFound when the key made none.
	Keyed(ctx context.Context, r PlaceRequest) (Order, error)
	// OpenGroup opens group gid with the caller's order no as its first
	// member; JoinGroup adds order no to group gid. Refusals: the sale's,
	// ErrWrongType, ErrGroupNotFound, ErrGroupClosed, ErrAlreadyMember,
	// ErrGroupFull, ErrNumberTaken. An Idempotency-Key that opened (or
	// joined) before gets that order back with Replay set.
	OpenGroup(ctx context.Context, gid, no string, r PlaceRequest) (Accepted, error)
	JoinGroup(ctx context.Context, gid, no string, r PlaceRequest) (Accepted, error)
	// Get reads order no; ErrNotFound when there is no record.
	Get(ctx context.Context, no string) (Order, error)
	// GetAcked is Get read with the replicas' acknowledgement (when
	// configured): what it says, a failover cannot take back — a write a
	// paused primary took, which its demotion then drops, is not read.
	GetAcked(ctx context.Context, no string) (Order, error)
	// Transition applies c to its order in one atomic step, with c.Fence
	// written into the order for MySQL to order changes by. Refusals:
	// ErrNotFound, ErrConflict (not in a state for the change, the payment
	// time is over, the group has not failed: final), ErrStale (c.Fence is
	// not above the order's: retry), ErrNotDue, ErrGroupClosed. Done, it
	// returns the order as the change left it (what Get would read).
	Transition(ctx context.Context, c Change) (Order, error)
	// GetGroup reads group gid; ErrGroupNotFound when there is none.
	GetGroup(ctx context.Context, gid string) (Group, error)
	// Forming returns up to limit of an activity's groups with a free place,
	// soonest deadline first.
	Forming(ctx context.Context, activityID int64, limit int64) ([]Group, error)
	// FailIfDue fails group gid if its deadline has passed and it has not
	// succeeded, and returns its status and its members' orders.
	FailIfDue(ctx context.Context, gid string) (GroupStatus, []string, error)
}

// UserTurn is how Store.Accept serialises one user's orders in a sale
// and charges their rate limit. The zero value takes no lock and charges
// nothing.
type UserTurn struct {
	// Lock: the accept runs under the per-(sale, user) lock, which makes
	// a user's concurrent orders (a double tap, retries with one
	// Idempotency-Key) strictly one after the other. The Store need not
	// take it when nobody holds it: a step that checks it is free and
	// accepts, atomically, is the lock's equal (lock elision,
	// docs/locking.md).
	Lock bool
	// Key and Options name the lock, as the Service names it for every
	// request of the user in the sale (its groups' too).
	Key     string
	Options LockOptions
	// Hold takes the lock even when nobody holds it: the way before lock
	// elision, for measuring what it saves. Same outcomes.
	Hold bool
	// TTL is the lock's while taken (renewed while held).
	TTL time.Duration
	// Wait bounds the wait for a lock another request holds (the
	// Service's LockWait); only the wait: the accept itself has all of
	// its context. 0: as long as the context allows.
	Wait time.Duration
	// Limit, when set, is the user's rate limit, charged once with the
	// accept: over it, the order is refused with a *RateLimited.
	Limit *RateLimit
}

// Accepted is what Store.Accept, OpenGroup and JoinGroup report.
type Accepted struct {
	Order     Order
	Replay    bool      // an earlier request with the same Idempotency-Key made it
	Remaining int64     // units left in the sale; -1 when not known
	Deadline  time.Time // of the order's group (OpenGroup, JoinGroup)
	// Item is the item ordered, refused or not ("" when not known), and
	// ItemRemaining its units left (the sale's, of one item); -1 when not
	// known.
	Item          string
	ItemRemaining int64
}

// Action is a status change (Store.Transition).
type Action string

// The actions: a user pays or cancels; the system expires an unpaid order,
// and settles the orders of a failed group (refund a paid one, cancel an
// unpaid one).
const (
	Pay          Action = "pay"
	Cancel       Action = "cancel"
	Expire       Action = "expire"
	Refund       Action = "refund"
	SettleUnpaid Action = "settle"
)

// Change is one status change of one order.
type Change struct {
	No      string
	GroupID string // the order's group, "" for a flash-sale order
	Action  Action
	Fence   int64 // of the per-order lock held for it
	UserID  int64 // who asks (Cancel); 0 for the system
	// PaymentID is the provider's payment that pays the order (Pay): the
	// record keeps it, so a confirmation handled twice is told from
	// another payment's.
	PaymentID string
}

// Tasks is the background work an order sets off: the api's relay sends it
// in batches, the worker queues durably (internal/tasks).
type Tasks interface {
	// ExpireThenSync queues a new order's payment timeout (due at payBy)
	// and then its first persistence, in that order: the sync takes the
	// order out of the outbox, where the reconciler would otherwise find
	// it, so a sync queued without its timeout could leave an unpaid order
	// holding stock for ever.
	ExpireThenSync(ctx context.Context, no string, payBy time.Time) error
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

// Buffered is implemented by Tasks whose ExpireThenSync, Sync and ExpireAt
// only remember the task and return at once (tasks.Relay, which sends
// them in batches off the request path): the Service calls them with the
// request's context as it is, not a follow-up context of their own
// (FollowUp), which is a context, a timer and its cancel an order for a
// call that cannot wait (issue 43: 5 allocations and a timer, BenchmarkFollowUp).
type Buffered interface {
	Buffered()
}

// Payments is what an order's changes set off at the payment provider
// (payment.Service): the Service calls them after the change is in Redis,
// and a failure is logged — the change stands; Abandon is an
// optimisation (late money is refunded anyway), and a refund's durable
// backstop is the worker's sync of the refunded order (tasks.Worker).
type Payments interface {
	// Abandon stops order no's payment from being paid later, where the
	// provider allows (its payment time ran out, the shopper cancelled,
	// its group failed unpaid).
	Abandon(ctx context.Context, no string) error
	// RefundOrder gives back the money that paid order no, now refunded
	// (a failed group's paid member): once per payment.
	RefundOrder(ctx context.Context, no string) error
}

// Records is the record of orders in MySQL, for what Redis no longer keeps.
type Records interface {
	// Get returns order no; ErrNotFound when it is not recorded.
	Get(ctx context.Context, no string) (Order, error)
	// ListByUser returns page (from 1) of pageSize of a user's recorded
	// orders, newest first, and how many there are.
	ListByUser(ctx context.Context, userID int64, page, pageSize int) ([]Order, int64, error)
}

// Locker takes the locks the Service serialises requests with.
type Locker interface {
	// Obtain waits for the lock named key for as long as ctx allows and
	// holds it for ttl, renewed while held. When ctx ends first its error
	// matches ctx's (context.DeadlineExceeded, context.Canceled); when the
	// lock's store did not answer, ErrUnavailable (both, when ctx ended
	// while the store had not answered).
	Obtain(ctx context.Context, key string, ttl time.Duration, o LockOptions) (Lock, error)
}

// LockOptions say how a lock is taken.
type LockOptions struct {
	// Family names the kind of lock for the metrics ("order-user").
	Family string
	// NoFence: the lock only serialises; it mints no fencing token (Fence
	// is 0) and leaves nothing in Redis once released.
	NoFence bool
	// Set, when not empty, names the set of locks this one belongs to:
	// many short locks that come and go together (one sale's per-user
	// locks), which the Locker may keep together for less than locks of
	// their own cost (internal/lock's tables). The key names the lock
	// within its set.
	Set string
}

// RateLimit is PerSecond requests a second (bursts of as many) for one
// caller: Scope and Who name whose budget ("user", "42").
type RateLimit struct {
	Scope, Who string
	PerSecond  int
}

// RateLimiter charges one request of who in scope against perSecond: a
// burst of perSecond, then perSecond a second. Over it, nothing is
// charged and retryAfter says when the next request would pass. The
// Service charges group requests with it (orders are charged in
// Store.Accept's step); the HTTP middleware charges the other routes of
// the same budget with the same limiter.
type RateLimiter interface {
	Allow(ctx context.Context, scope, who string, perSecond int) (allowed bool, retryAfter time.Duration, err error)
}

// Lock is a held lock.
type Lock interface {
	// Fence is the hold's fencing token, increasing per lock name.
	Fence() int64
	Release(ctx context.Context) error
}

// SoldOut is the local sold-out flag (stock.Keeper): sales — and items of
// a sale of several — this process saw sell out a moment ago, refused
// without asking Redis.
type SoldOut interface {
	SoldOut(activityID int64) bool
	MarkSoldOut(activityID int64)
	ItemSoldOut(activityID int64, sku string) bool
	MarkItemSoldOut(activityID int64, sku string)
}
