package lock

import (
	"errors"
	"fmt"
)

// Errors returned by every lock kind. Check them with errors.Is; the concrete
// error may wrap more detail (the Redis error, the context error).
var (
	// ErrNotObtained means the lock is held by someone else (TryObtain).
	ErrNotObtained = errors.New("lock: not obtained")

	// ErrNotHeld means the caller no longer holds the lock: it expired, was
	// taken over, or was released already. Release and Refresh return it.
	ErrNotHeld = errors.New("lock: not held")

	// ErrCanceled means Obtain gave up because its context ended. The context's
	// own error is joined, so errors.Is(err, context.DeadlineExceeded) works too.
	ErrCanceled = errors.New("lock: obtain canceled")

	// ErrUnavailable wraps a failure to reach Redis (network, timeout, server
	// error). The lock state is unknown to the caller.
	ErrUnavailable = errors.New("lock: redis unavailable")

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
