package httpapi

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/stock"
)

// domainCodes is the one table from the domains' errors to the API's codes,
// checked in order. A refusal (refusal.Error) carries its own message for
// the client; other errors of a kind get the message here.
var domainCodes = []struct {
	kind    error
	code    httperr.Code
	message string
}{
	{activity.ErrNotFound, httperr.NotFound, "activity not found"},
	{activity.ErrInvalid, httperr.InvalidArgument, "invalid activity"},
	{activity.ErrConflict, httperr.Conflict, "the activity's state does not allow this"},
	{activity.ErrSoldOut, httperr.SoldOut, "sold out"},
	{activity.ErrLimitExceeded, httperr.LimitExceeded, "over the per-user limit"},
	{activity.ErrNotStarted, httperr.NotStarted, "the sale has not started"},
	{activity.ErrEnded, httperr.Ended, "the sale has ended"},
	{activity.ErrNotOnSale, httperr.NotFound, "not found"},
	{order.ErrGroupFull, httperr.GroupFull, "the group is full"},
	{order.ErrGroupClosed, httperr.GroupClosed, "the group is closed: it succeeded, failed, or its deadline passed"},
	{order.ErrAlreadyMember, httperr.AlreadyMember, "you are in this group already"},
	{order.ErrGroupNotFound, httperr.NotFound, "no such group"},
	{order.ErrWrongType, httperr.Conflict, "not this kind of activity"},
	{order.ErrNotFound, httperr.NotFound, "not found"},
	{order.ErrInvalid, httperr.InvalidArgument, "invalid request"},
	{order.ErrConflict, httperr.Conflict, "the order's state does not allow this"},
	{order.ErrNotDue, httperr.Conflict, "not due yet"},
	// Stale: a newer change of the order was applied, or the lock's fence
	// was behind; not final, so a 503 the client retries.
	{order.ErrStale, httperr.Unavailable, "a newer change was applied; try again"},
	{order.ErrNumberTaken, httperr.Unavailable, "try again"},
	// Busy: the user's other request holds the lock (or a crashed one's
	// lock has not expired yet): not final, so a 503 the client retries.
	{order.ErrBusy, httperr.Unavailable, "another request is in progress; try again"},
	{order.ErrRateLimited, httperr.RateLimited, "too many requests"},
	{order.ErrNotReplicated, httperr.Unavailable, "not yet saved on enough replicas; retry with the same Idempotency-Key"},
	{order.ErrUnavailable, httperr.Unavailable, "orders are unavailable, try again"},
	{payment.ErrNotPayable, httperr.Conflict, "the order cannot be paid now"},
	{payment.ErrNotFound, httperr.NotFound, "no payment for this order"},
	{payment.ErrBadSignature, httperr.InvalidSignature, "the webhook's signature or timestamp is not valid"},
	{payment.ErrBadEvent, httperr.InvalidArgument, "not an event of the provider's"},
	{payment.ErrProvider, httperr.Unavailable, "the payment provider is unavailable, try again"},
	{payment.ErrUnavailable, httperr.Unavailable, "payments are unavailable, try again"},
	{stock.ErrUnavailable, httperr.Unavailable, "stock is unavailable, try again"},
	{stock.ErrInvalid, httperr.InvalidArgument, "invalid"},
	{mysqlstore.ErrUnavailable, httperr.Unavailable, "the record is unavailable, try again"},
	{presence.ErrInvalid, httperr.InvalidArgument, "invalid heartbeat"},
	{presence.ErrUnavailable, httperr.Unavailable, "presence is unavailable, try again"},
	// The lock library's, from the admin API's lock inspection.
	{lock.ErrNotHeld, httperr.NotFound, "nobody holds this lock"},
	{lock.ErrInvalid, httperr.InvalidArgument, "not a lock name"},
	{lock.ErrUnavailable, httperr.Unavailable, "locks are unavailable, try again"},
}

// apiError translates a domain or adapter error into what the client sees;
// the one place where errors cross into HTTP. Anything unknown stays an
// internal error (logged with its detail by httperr.Write), and so does the
// cause of an UNAVAILABLE.
func apiError(err error) error {
	var he *httperr.Error
	if errors.As(err, &he) {
		return he // the HTTP layer's own (bad JSON, a bad path id)
	}
	var fe *activity.FieldError
	if errors.As(err, &fe) {
		return &httperr.Error{Code: httperr.InvalidArgument, Message: fe.Error(), Field: fe.Field}
	}
	for _, c := range domainCodes {
		if !errors.Is(err, c.kind) {
			continue
		}
		if c.code == httperr.Unavailable && !errors.Is(err, order.ErrBusy) && !errors.Is(err, order.ErrStale) {
			return &httperr.Error{Code: c.code, Message: c.message, Cause: err}
		}
		return &httperr.Error{Code: c.code, Message: refusal.Message(err, c.message), Field: refusal.Field(err)}
	}
	return err
}

// fail answers err, translated by apiError, and aborts the request.
func fail(c *gin.Context, err error) {
	var limited *order.RateLimited
	if errors.As(err, &limited) {
		tooMany(c, limited.PerSecond, "user", limited.RetryAfter)
		return
	}
	httperr.Write(c, apiError(err))
}

// tooMany answers 429 RATE_LIMITED with Retry-After (whole seconds, rounded
// up) and aborts the request: the one form of every rate limit's refusal,
// the middleware's per IP or user and the user lock's guard alike.
func tooMany(c *gin.Context, perSecond int, per string, retryAfter time.Duration) {
	c.Header("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	httperr.Write(c, httperr.New(httperr.RateLimited, "more than %d requests a second per %s", perSecond, per))
}
