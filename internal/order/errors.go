package order

import (
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/internal/refusal"
)

// Errors. Check them with errors.Is. A refusal a caller may read comes as a
// *refusal.Error of one of these kinds, carrying its message; the sale's own
// refusals (sold out, limit, window) are activity's errors.
var (
	ErrNotFound = errors.New("order: not found")
	ErrInvalid  = errors.New("order: invalid request")
	// ErrConflict: the order is not in a state that allows the change (paying
	// a cancelled order, cancelling a paid one, paying after the deadline).
	ErrConflict = errors.New("order: conflict")
	// ErrBusy: another request of the same user or order held the lock for
	// longer than this one could wait.
	ErrBusy = errors.New("order: busy, try again")
	// ErrLockWait wraps the failure of a wait for a lock the Store took
	// itself (LockOptions.Defer): the Service turns it into ErrBusy, the
	// request's own end, or ErrUnavailable, as it does Locker.Obtain's.
	// The Service's answer to a request whose context ended while it
	// waited for a lock is one too, with the context's error and the
	// wait's.
	ErrLockWait = errors.New("order: lock wait")
	// ErrRateLimited: the caller asked more often than its rate allows
	// (Config.UserRPS); it comes as a *RateLimited.
	ErrRateLimited = errors.New("order: rate limited")
	// ErrUnavailable wraps a failure of Redis or the task queue.
	ErrUnavailable = errors.New("order: unavailable")
	// ErrNotReplicated: the change is on the Redis primary but fewer
	// replicas than asked for (REDIS_ACK_REPLICAS) confirmed it in time, so
	// a failover could still undo it. It is not reported as done; a retry
	// with the same Idempotency-Key returns the order if it survived.
	ErrNotReplicated = errors.New("order: not yet replicated")
	// ErrNotDue: an expiry or a settlement ran before its time (a clock, or
	// an early task); it is retried.
	ErrNotDue = errors.New("order: not due")
	// ErrStale: a change carried a fence not above the order's. Unlike
	// ErrConflict it is not final: the order may still need the change
	// (a refund, an expiry), and a retry takes the lock and a fence anew.
	ErrStale = errors.New("order: stale change")
	// ErrNumberTaken: the order number or group id drawn for a new record
	// is in use (80 random bits make it all but impossible; the store
	// refuses rather than write over an accepted order). Draw another.
	ErrNumberTaken = errors.New("order: number taken")

	// ErrItemRequired: an order or a group of a sale of several items that
	// names none (an ErrInvalid, of the field "item").
	ErrItemRequired error = refusal.OfField(ErrInvalid, "item", "the sale has several items: name one (item, its sku)")

	// ErrWrongType: a flash-sale order on a group buy, or a group on a flash sale.
	ErrWrongType = errors.New("order: not this kind of activity")
	// Group buys.
	ErrGroupNotFound = errors.New("order: no such group")
	ErrGroupClosed   = errors.New("order: the group is closed") // succeeded, failed, or past its deadline
	ErrGroupFull     = errors.New("order: the group is full")
	ErrAlreadyMember = errors.New("order: already a member of the group")
)

// ErrBadQuantity refuses a quantity outside 1..MaxQuantity: the one
// statement of the rule's refusal, kind ErrInvalid. PlaceRequest.Validate
// returns it, and so does the sale scripts' code 6 (redisstore.SaleRefusal),
// which Validate makes unreachable from the order path; the scripts keep
// their check, since a quantity below 1 there would give units back.
var ErrBadQuantity error = refusal.OfField(ErrInvalid, "quantity", "quantity must be between 1 and %d", MaxQuantity)

// RateLimited is the refusal of kind ErrRateLimited: PerSecond was the
// limit, RetryAfter is when a request would be allowed again.
type RateLimited struct {
	PerSecond  int
	RetryAfter time.Duration
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("%v: more than %d requests a second; retry after %v", ErrRateLimited, e.PerSecond, e.RetryAfter)
}

// Unwrap makes it match ErrRateLimited.
func (e *RateLimited) Unwrap() error { return ErrRateLimited }
