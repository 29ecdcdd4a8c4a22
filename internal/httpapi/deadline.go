package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"
)

// DefaultRequestTimeout is Deps.RequestTimeout's default (REQUEST_TIMEOUT).
const DefaultRequestTimeout = 3 * time.Second

// deadline gives each request's context a deadline d from now. Everything
// the handlers call with that context stops at it — go-redis (its
// ContextTimeoutEnabled sets the socket deadline from the context), the
// batched scripts (redispipe), lock waits, MySQL — and fail answers a
// request whose deadline passed 503 UNAVAILABLE with Retry-After, naming
// what it was waiting on (late): not known to be done, to be retried (with
// the same Idempotency-Key, on a route that takes one). Without it a frozen
// or unreachable primary held a request for go-redis's read timeout (5 s)
// times its retries, or the pipe's own 10 s bound, long past a phone's
// patience. A client that goes away first cancels the same context: that
// stays 499, not 503.
func deadline(d time.Duration) gin.HandlerFunc {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	cause := error(requestTimeout(d)) // once, not an allocation per request
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeoutCause(c.Request.Context(), d, cause)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// requestTimeout is the cause (context.Cause) of the end of a request's
// context that deadline ended: REQUEST_TIMEOUT, which the 503 states.
type requestTimeout time.Duration

func (d requestTimeout) Error() string {
	return fmt.Sprintf("REQUEST_TIMEOUT (%v) passed", time.Duration(d))
}

// within says how long a request whose context is ctx had: "within
// REQUEST_TIMEOUT (3s)", or "in time" for a deadline not deadline's.
func within(ctx context.Context) string {
	var d requestTimeout
	if errors.As(context.Cause(ctx), &d) {
		return fmt.Sprintf("within REQUEST_TIMEOUT (%v)", time.Duration(d))
	}
	return "in time"
}
