package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by every lock kind. Check them with errors.Is; the concrete
// error may wrap more detail (the Redis error, the context error).
var (
	// ErrNotObtained means the lock is held by someone else (TryObtain).
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld means the caller no longer holds the lock: it expired, was
	// taken over, or was released already. Release and Refresh return it.
	ErrNotHeld = errors.New("lock: not held")

	// ErrCanceled means an obtain, a release or a renewal gave up because its
	// context ended. The context's own error is joined, so
	// errors.Is(err, context.DeadlineExceeded) works too. A mutex's obtain
	// that ended while Redis had not answered it matches ErrUnavailable
	// too.
	ErrCanceled = errors.New("lock: canceled")

	// ErrUnavailable wraps a failure to reach Redis (network, timeout, server
	// error). The lock state is unknown to the caller.
	ErrUnavailable = errors.New("lock: redis unavailable")

	// ErrNoQuorum means fewer than a majority of Redlock's nodes answered:
	// the lock's state cannot be known. Such errors also match ErrUnavailable.
	ErrNoQuorum = errors.New("lock: no quorum of redlock nodes reachable")

	// ErrInvalid reports a caller mistake: empty or malformed key, ttl not
	// positive, nil client.
	ErrInvalid = errors.New("lock: invalid argument")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

func canceled(err error) error {
	return fmt.Errorf("%w: %w", ErrCanceled, err)
}

// cutOff is the error of a call to Redis (op) that failed (err) as ctx
// ended: the wait gave up (ErrCanceled, matching ctx's error), and Redis
// had not answered, so the lock's state is not known (ErrUnavailable) —
// not a holder that kept the lock, which a caller may want to tell apart
// (the API's 503 names Redis, not another request).
func cutOff(ctx context.Context, op string, err error) error {
	return fmt.Errorf("%w: %w", canceled(ctxErr(ctx)), unavailable(op, err))
}

// ended reports whether ctx is over. It also looks at the deadline itself:
// go-redis with ContextTimeoutEnabled puts the deadline on the socket, and the
// resulting i/o timeout can surface a moment before ctx.Err() is set.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// ctxErr is ctx.Err(), or DeadlineExceeded when ended saw the deadline first.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

func isErr(err, target error) bool { return errors.Is(err, target) }
