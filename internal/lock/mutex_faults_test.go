package lock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
)

// slowReplies delays the answer of every script call by d, alone or in a
// pipeline (the mutex batches its scripts into pipelines).
type slowReplies struct{ d time.Duration }

func (slowReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.HasPrefix(cmd.Name(), "eval") {
			time.Sleep(h.d)
		}
		return err
	}
}
func (h slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if strings.HasPrefix(cmd.Name(), "eval") {
				time.Sleep(h.d)
				break
			}
		}
		return err
	}
}

// An obtain answered after the lock's validity must not hand out a lock: by
// then the key may have expired and been taken.
func TestMutex_obtainAnsweredTooLate_isNotObtained(t *testing.T) {
	srv, _, other := setup(t)
	slow := srv.Client(t)
	slow.AddHook(slowReplies{d: 1500 * time.Millisecond})
	c := newClient(t, slow, lock.Config{})

	_, err := c.TryObtain(context.Background(), "k", time.Second)
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("late TryObtain: %v, want ErrNotObtained", err)
	}
	if _, err := other.TryObtain(context.Background(), "k", time.Second); err != nil {
		t.Fatalf("the late obtain left the key held: %v", err)
	}
}

// Lost must close at sent+ttl-drift: before Redis can expire the key and
// hand it to someone else, whether renewals stall (paused server) or fail
// fast (dead server).
func TestMutex_Lost_closesBeforeTheServerCouldExpireTheKey(t *testing.T) {
	const ttl = 5 * time.Second // its 52ms drift margin absorbs timer lateness on a loaded machine
	for _, fault := range []string{"pause", "kill"} {
		t.Run(fault, func(t *testing.T) {
			srv, _, c := setup(t)
			start := time.Now()
			l := mustObtain(t, c, "k", ttl)
			if fault == "pause" {
				srv.Pause()
				defer srv.Resume()
			} else {
				srv.Kill()
			}
			<-l.Lost()
			at := time.Since(start)
			if at >= ttl {
				t.Fatalf("Lost closed %v after obtain: not before the %v ttl ran out", at, ttl)
			}
			if at < ttl-60*time.Millisecond {
				t.Fatalf("Lost closed %v after obtain, well before the validity (%v minus drift) ended", at, ttl)
			}
		})
	}
}

func TestMutex_Release_concurrently_exactlyOneSucceedsAndLostStaysOpen(t *testing.T) {
	_, _, c := setup(t)
	for range 50 {
		l := mustObtain(t, c, "k", time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = l.Release(context.Background()) }()
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("two concurrent Releases returned %v and %v: want one nil, one ErrNotHeld", errs[0], errs[1])
		}
		assertOpen(t, l.Lost(), "Lost after a successful Release")
	}
}

func TestMutex_subMillisecondFenceRetention_keepsFencesIncreasing(t *testing.T) {
	_, rdb, _ := setup(t)
	c := newClient(t, rdb, lock.Config{FenceRetention: 500 * time.Microsecond})
	var last int64
	for range 10 {
		l := mustObtain(t, c, "k", time.Second)
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		l.Release(context.Background())
		time.Sleep(2 * time.Millisecond)
	}
}
