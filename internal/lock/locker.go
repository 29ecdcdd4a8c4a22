package lock

import (
	"context"
	"time"
)

// Locker is what every lock kind offers: the Redis mutex (Client), the
// reentrant lock (Client.Reentrant), the fair lock (Client.Fair), Redlock and
// the MySQL lock. Code that takes a Locker runs on any of them; all return
// the same *Lock (Fence, Lost, Release) and the same errors.
type Locker interface {
	// TryObtain makes one attempt; ErrNotObtained when the lock is held.
	TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error)
	// Obtain waits for the lock as long as ctx allows; ErrCanceled after.
	Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (*Lock, error)
}

// Inspector reports who holds a lock (for the admin API and diagnosis).
type Inspector interface {
	Holder(ctx context.Context, key string) (Holder, error)
}

// TableInspector is Inspector for the mutexes kept in tables (InTable).
type TableInspector interface {
	HolderIn(ctx context.Context, table, key string) (Holder, error)
}

var _ TableInspector = (*Client)(nil)

var (
	_ Locker    = (*Client)(nil)
	_ Locker    = (*Reentrant)(nil)
	_ Locker    = (*Fair)(nil)
	_ Locker    = (*Redlock)(nil)
	_ Locker    = (*MySQL)(nil)
	_ Inspector = (*Client)(nil)
	_ Inspector = (*Reentrant)(nil)
	_ Inspector = (*Fair)(nil)
	_ Inspector = (*MySQL)(nil)
	_ Inspector = (*Redlock)(nil)
)
