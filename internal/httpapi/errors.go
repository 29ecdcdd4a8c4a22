package httpapi

import (
	"context"
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
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/waitingroom"
	"github.com/flashsale/flashsale/internal/webhook"
)

// domainCodes is the one table from the domains' errors to the API's codes,
// checked in order. A refusal (refusal.Error) carries its own message for
// the client; other errors of a kind get the message here. The failure of
// a dependency (dep) is said by the dependency's message instead, with how
// to try again (translate); the more specific of those come first (a
// payment record MySQL did not write is a payment.ErrUnavailable too).
var domainCodes = []struct {
	kind    error
	code    httperr.Code
	message string
	dep     *dependency
}{
	{activity.ErrNotFound, httperr.NotFound, "activity not found", nil},
	{activity.ErrInvalid, httperr.InvalidArgument, "invalid activity", nil},
	{activity.ErrConflict, httperr.Conflict, "the activity's state does not allow this", nil},
	{activity.ErrSoldOut, httperr.SoldOut, "sold out", nil},
	{activity.ErrLimitExceeded, httperr.LimitExceeded, "over the per-user limit", nil},
	{activity.ErrNotStarted, httperr.NotStarted, "the sale has not started", nil},
	{activity.ErrEnded, httperr.Ended, "the sale has ended", nil},
	{activity.ErrPaused, httperr.Paused, "the sale is paused; try again later", nil},
	{activity.ErrNotOnSale, httperr.NotFound, "not found", nil},
	{order.ErrGroupFull, httperr.GroupFull, "the group is full", nil},
	{order.ErrGroupClosed, httperr.GroupClosed, "the group is closed: it succeeded, failed, or its deadline passed", nil},
	{order.ErrAlreadyMember, httperr.AlreadyMember, "you are in this group already", nil},
	{order.ErrGroupNotFound, httperr.NotFound, "no such group", nil},
	{order.ErrWrongType, httperr.Conflict, "not this kind of activity", nil},
	{order.ErrNotFound, httperr.NotFound, "not found", nil},
	{order.ErrInvalid, httperr.InvalidArgument, "invalid request", nil},
	{order.ErrConflict, httperr.Conflict, "the order's state does not allow this", nil},
	{order.ErrNotDue, httperr.Conflict, "not due yet", nil},
	// Stale: a newer change of the order was applied, or the lock's fence
	// was behind; not final, so a 503 the client retries.
	{order.ErrStale, httperr.Unavailable, "a newer change was applied; try again", nil},
	{order.ErrNumberTaken, httperr.Unavailable, "try again", nil},
	// Busy: the user's other request holds the lock (or a crashed one's
	// lock has not expired yet): not final, so a 503 the client retries.
	{order.ErrBusy, httperr.Unavailable, "another request is in progress; try again", nil},
	{order.ErrRateLimited, httperr.RateLimited, "too many requests", nil},
	{payment.ErrProvider, httperr.Unavailable, "", depProvider},
	{mysqlstore.ErrUnavailable, httperr.Unavailable, "", depMySQL},
	{order.ErrNotReplicated, httperr.Unavailable, "", depReplicas},
	// Redis's, or the task queue's (asynq, in Redis too).
	{order.ErrUnavailable, httperr.Unavailable, "", depRedis},
	{payment.ErrNotPayable, httperr.Conflict, "the order cannot be paid now", nil},
	{payment.ErrNotFound, httperr.NotFound, "no payment for this order", nil},
	{payment.ErrBadSignature, httperr.InvalidSignature, "the webhook's signature or timestamp is not valid", nil},
	{payment.ErrBadEvent, httperr.InvalidArgument, "not an event of the provider's", nil},
	// The payments' records in Redis, and their tasks (MySQL's are
	// mysqlstore's too, above).
	{payment.ErrUnavailable, httperr.Unavailable, "", depRedis},
	{stock.ErrUnavailable, httperr.Unavailable, "", depRedis},
	{stock.ErrInvalid, httperr.InvalidArgument, "invalid", nil},
	{presence.ErrInvalid, httperr.InvalidArgument, "invalid heartbeat", nil},
	{presence.ErrUnavailable, httperr.Unavailable, "", depRedis},
	// The webhooks' (docs/webhooks.md): endpoints, events, the queue.
	{webhook.ErrNotFound, httperr.NotFound, "not found", nil},
	{webhook.ErrInvalid, httperr.InvalidArgument, "invalid webhook endpoint", nil},
	{webhook.ErrConflict, httperr.Conflict, "the endpoint's state does not allow this", nil},
	// MySQL's are mysqlstore's too, above; what is left is the queue's.
	{webhook.ErrUnavailable, httperr.Unavailable, "", depRedis},
	// The lock library's, from the admin API's lock inspection.
	{lock.ErrNotHeld, httperr.NotFound, "nobody holds this lock", nil},
	{lock.ErrInvalid, httperr.InvalidArgument, "not a lock name", nil},
	{lock.ErrUnavailable, httperr.Unavailable, "", depRedis},
	// The waiting room's (docs/waiting-room.md).
	{waitingroom.ErrNoWaitingRoom, httperr.NoWaitingRoom, "this sale has no waiting room: order directly", nil},
	{waitingroom.ErrNotInQueue, httperr.NotInQueue, "you have not joined this sale's queue: POST to join", nil},
	{waitingroom.ErrAdmissionExpired, httperr.AdmissionExpired, "your admission lapsed unused; it is not renewed", nil},
	{waitingroom.ErrPowRequired, httperr.PowRequired, "joining this sale needs a proof of work: POST .../queue/challenge", nil},
	{waitingroom.ErrPowInvalid, httperr.PowInvalid, "the proof of work is not good: a fresh challenge of yours, and enough zero bits", nil},
	{waitingroom.ErrNotAdmitted, httperr.NotAdmitted, "this sale admits through its waiting room: send your Admission-Token", nil},
	{waitingroom.ErrUnavailable, httperr.Unavailable, "", depRedis},
	// The order streams' (docs/streams.md).
	{stream.ErrBadCursor, httperr.InvalidArgument, "Last-Event-ID is not an id this stream sent", nil},
	{stream.ErrClosed, httperr.Unavailable, "this server is shutting down; connect again", nil},
	// A request whose deadline passed while it waited for a lock; last,
	// for Redis failing under a wait is an order.ErrUnavailable that
	// wraps an ErrLockWait.
	{order.ErrLockWait, httperr.Unavailable, "", depLock},
}

// A dependency is what a request waits on — a server, or a lock another
// request holds — named by the message of a 503 UNAVAILABLE: what it says
// when the dependency failed, and when it did not answer before the
// request's deadline (followed by "within REQUEST_TIMEOUT (3s)").
type dependency struct{ failed, late string }

var (
	depRedis    = &dependency{"Redis is unavailable", "Redis did not answer"}
	depMySQL    = &dependency{"MySQL is unavailable", "MySQL did not answer"}
	depProvider = &dependency{"the payment provider is unavailable", "the payment provider did not answer"}
	depReplicas = &dependency{"not yet saved on enough Redis replicas", "Redis's replicas did not confirm the change"}
	// A lock's wait ends at the request's deadline: before it, a lock
	// held too long is ErrBusy, and Redis failing under the wait is
	// Redis's (lock.ErrUnavailable).
	depLock = &dependency{"a lock another request holds was not free",
		"the lock this request waits for (another request of the same user or order holds it) was not free"}
)

// How the message of a 503 says to try again: on a route that takes an
// Idempotency-Key (placing an order, opening or joining a group:
// failKeyed), with the same key, since what was not known to be done may
// have been; on any other, plainly (a pay or a cancel is of its order
// already, a read or an admin change repeats as it is).
const (
	tryAgain        = "try again"
	tryAgainWithKey = "try again with the same Idempotency-Key: an order this attempt made is returned, not made twice"
)

// apiError is translate on a route that takes no Idempotency-Key.
func apiError(err error) error { return translate(err, tryAgain) }

// translate turns a domain or adapter error into what the client sees,
// a 503's message ending in retry (tryAgain, tryAgainWithKey); the one
// place where errors cross into HTTP. Anything unknown stays an internal
// error (logged with its detail by httperr.Write), and so does the cause
// of an UNAVAILABLE.
func translate(err error, retry string) error {
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
		switch {
		case c.dep != nil:
			return &httperr.Error{Code: c.code, Message: c.dep.failed + "; " + retry, Cause: err}
		case c.code == httperr.Unavailable && !errors.Is(err, order.ErrBusy) && !errors.Is(err, order.ErrStale):
			return &httperr.Error{Code: c.code, Message: c.message, Cause: err}
		}
		return &httperr.Error{Code: c.code, Message: refusal.Message(err, c.message), Field: refusal.Field(err)}
	}
	return err
}

// dependencyOf is the dependency whose failure err is (domainCodes), or
// nil.
func dependencyOf(err error) *dependency {
	for _, c := range domainCodes {
		if errors.Is(err, c.kind) {
			return c.dep
		}
	}
	return nil
}

// late is the answer to a request whose deadline passed with the error err
// (e, translated): a refusal (4xx) made in time stands; anything else — a
// lock wait, a Redis read cut off, the context's error itself — is not
// known to be done, and trying again is right: 503 UNAVAILABLE, saying
// what the request was waiting on, for how long, and how to try again.
func late(ctx context.Context, err, e error, retry string) error {
	var he *httperr.Error
	if errors.As(e, &he) && httperr.Status(he.Code) < 500 {
		return e
	}
	what := "not done"
	if d := dependencyOf(err); d != nil {
		what = d.late
	}
	return &httperr.Error{Code: httperr.Unavailable, Message: what + " " + within(ctx) + "; " + retry, Cause: err}
}

// fail answers err, translated by apiError, and aborts the request; a 503
// says to try again. A route that takes an Idempotency-Key answers with
// failKeyed.
func fail(c *gin.Context, err error) { answer(c, err, tryAgain) }

// failKeyed is fail on a route that takes an Idempotency-Key: a 503 says
// to try again with the same key.
func failKeyed(c *gin.Context, err error) { answer(c, err, tryAgainWithKey) }

// answer is fail's and failKeyed's: err translated, or, past the
// request's deadline, late's answer.
func answer(c *gin.Context, err error, retry string) {
	var limited *order.RateLimited
	if errors.As(err, &limited) {
		tooMany(c, limited.PerSecond, "user", limited.RetryAfter)
		return
	}
	if errors.Is(err, activity.ErrPaused) {
		c.Header("Retry-After", pausedRetryAfter)
	}
	e := translate(err, retry)
	if ctx := c.Request.Context(); pastDeadline(ctx) {
		e = late(ctx, err, e, retry)
	}
	httperr.Write(c, e)
}

// pastDeadline reports whether ctx's deadline has passed. When the clock
// says so before ctx does — a call's error can tell a moment before ctx
// (go-redis sets the socket's deadline from it) — it waits the moment for
// ctx to end, so that its cause says REQUEST_TIMEOUT.
func pastDeadline(ctx context.Context) bool {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done()
	}
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// pausedRetryAfter is the Retry-After, in seconds, of a PAUSED answer: a
// pause is an operator's, for as long as it takes, so a client is told to
// look again in a while, not hammer.
const pausedRetryAfter = "5"

// tooMany answers 429 RATE_LIMITED with Retry-After (whole seconds, rounded
// up) and aborts the request: the one form of every rate limit's refusal,
// the middleware's per IP or user and the user lock's guard alike.
func tooMany(c *gin.Context, perSecond int, per string, retryAfter time.Duration) {
	c.Header("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	httperr.Write(c, httperr.New(httperr.RateLimited, "more than %d requests a second per %s", perSecond, per))
}
