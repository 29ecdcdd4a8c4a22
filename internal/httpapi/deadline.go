package httpapi

import (
	"context"
	"time"

	"github.com/gin-gonic/gin"
)

// DefaultRequestTimeout is Deps.RequestTimeout's default (REQUEST_TIMEOUT).
const DefaultRequestTimeout = 3 * time.Second

// deadline gives each request's context a deadline d from now. Everything
// the handlers call with that context stops at it — go-redis (its
// ContextTimeoutEnabled sets the socket deadline from the context), the
// batched scripts (redispipe), lock waits, MySQL — and httperr.Write
// answers a request whose deadline passed 503 UNAVAILABLE with Retry-After:
// not known to be done, to be retried with the same Idempotency-Key.
// Without it a frozen or unreachable primary held a request for go-redis's
// read timeout (5 s) times its retries, or the pipe's own 10 s bound,
// long past a phone's patience. A client that goes away first cancels the
// same context: that stays 499, not 503.
func deadline(d time.Duration) gin.HandlerFunc {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), d)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}
