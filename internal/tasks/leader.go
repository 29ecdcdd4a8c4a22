package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

// lead runs work while this process holds the lock named key — one leader
// among the workers — taking it again whenever it is lost or released,
// until ctx ends. work's context ends when the lock is lost: a pass in
// progress stops there, since another worker may lead by then and two
// leaders would do the same work at once. (The reconciler and the
// webhooks' dispatcher lead this way.)
func lead(ctx context.Context, locks lock.Locker, key, family string, log *slog.Logger, work func(ctx context.Context)) {
	for ctx.Err() == nil {
		l, err := locks.Obtain(ctx, key, 10*time.Second, lock.WithFamily(family))
		if err != nil {
			if ctx.Err() == nil {
				log.Warn(family+": cannot take the leader lock", "lock", key, "err", err)
				time.Sleep(time.Second)
			}
			continue
		}
		held(ctx, l, func() { log.Warn(family + ": leadership lost") }, work)
		_ = l.Release(context.WithoutCancel(ctx))
	}
}

// held runs work with a context that ends when l is lost (then lost is
// called) or ctx ends.
func held(ctx context.Context, l *lock.Lock, lost func(), work func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Lost():
			lost()
			cancel()
		case <-ctx.Done():
		}
	}()
	work(ctx)
}
