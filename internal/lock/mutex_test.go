package lock_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func newClient(t *testing.T, rdb redis.UniversalClient, cfg lock.Config) *lock.Client {
	t.Helper()
	c := lock.NewClient(rdb, cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

func setup(t *testing.T) (*testenv.RedisServer, *redis.Client, *lock.Client) {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	return srv, rdb, newClient(t, rdb, lock.Config{})
}

func mustObtain(t *testing.T, c *lock.Client, key string, ttl time.Duration, opts ...lock.Option) *lock.Lock {
	t.Helper()
	l, err := c.TryObtain(context.Background(), key, ttl, opts...)
	if err != nil {
		t.Fatalf("TryObtain(%q): %v", key, err)
	}
	return l
}

func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
		return 0
	}
}

func assertOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: closed", what)
	default:
	}
}

func TestMutex_TryObtain_whenHeld_returnsNotObtained(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l := mustObtain(t, c, "k", time.Second)

	_, err := c.TryObtain(ctx, "k", time.Second)
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second TryObtain: got %v, want ErrNotObtained", err)
	}

	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l2 := mustObtain(t, c, "k", time.Second)
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence did not increase: %d then %d", l.Fence(), l2.Fence())
	}
}

func TestMutex_Release_twice_returnsNotHeld(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l := mustObtain(t, c, "k", time.Second)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release: got %v, want ErrNotHeld", err)
	}
	assertOpen(t, l.Lost(), "Lost after a clean release")
}

func TestMutex_Holder_showsOwnerMetadata(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	if _, err := c.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Holder of a free lock: got %v, want ErrNotHeld", err)
	}
	before := time.Now()
	l := mustObtain(t, c, "k", 10*time.Second, lock.WithLabel("order-import"))
	defer l.Release(ctx)

	h, err := c.Holder(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if h.PID != os.Getpid() || h.Host != host || h.Label != "order-import" || h.Fence != l.Fence() {
		t.Fatalf("holder = %+v; want pid %d host %q label order-import fence %d", h, os.Getpid(), host, l.Fence())
	}
	if len(h.Owner) != 8 {
		t.Fatalf("owner %q: want an 8-character token prefix", h.Owner)
	}
	if h.TTL <= 9*time.Second || h.TTL > 10*time.Second {
		t.Fatalf("ttl %v, want about 10s", h.TTL)
	}
	if d := h.AcquiredAt.Sub(before); d < -time.Second || d > time.Second {
		t.Fatalf("acquired at %v, want about %v", h.AcquiredAt, before)
	}
}

func TestMutex_renewal_keepsShortTTLLockFor2s(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l := mustObtain(t, c, "k", 300*time.Millisecond)

	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := c.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("another client obtained a renewed lock: %v", err)
		}
		assertOpen(t, l.Lost(), "Lost of a renewed lock")
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after 2s of renewal: %v", err)
	}
}

func TestMutex_withoutRenewal_expiresAndReleaseReturnsNotHeld(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	l := mustObtain(t, c, "k", 300*time.Millisecond, lock.WithoutRenewal())

	waitClosed(t, l.Lost(), 2*time.Second, "Lost of an unrenewed lock")
	time.Sleep(20 * time.Millisecond) // Lost fires drift early: let Redis expire it too
	other := mustObtain(t, c, "k", time.Second)
	defer other.Release(ctx)

	if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after expiry: got %v, want ErrNotHeld", err)
	}
	if h, err := c.Holder(ctx, "k"); err != nil || h.Fence != other.Fence() {
		t.Fatalf("stale Release disturbed the new holder: %+v, %v", h, err)
	}
}

func TestMutex_renewal_neverExtendsAnotherHoldersLock(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	// A renews (to 3s) after 1s; B's unrenewed lock has 2s, so about 1s
	// left by then. A renewal by A landing on B's lock would lift it to 3s.
	a := mustObtain(t, c, "k", 3*time.Second)

	// Someone deletes A's lock behind its back and B takes it, unrenewed.
	if err := rdb.Del(ctx, "fs:lock:{k}").Err(); err != nil {
		t.Fatal(err)
	}
	b := mustObtain(t, c, "k", 2*time.Second, lock.WithoutRenewal())

	waitClosed(t, a.Lost(), 2*time.Second, "A's Lost after its lock was taken (at A's first renewal)")
	h, err := c.Holder(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if h.Fence != b.Fence() || h.TTL > 1200*time.Millisecond || h.TTL < 0 {
		t.Fatalf("B's lock was touched: %+v (B fence %d); its ttl must be about 1s", h, b.Fence())
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A.Release: got %v, want ErrNotHeld", err)
	}
	if _, err := c.Holder(ctx, "k"); err != nil {
		t.Fatalf("A's Release deleted B's lock: %v", err)
	}
}

func TestMutex_Lost_closesWhenRedisIsPausedPastTTL(t *testing.T) {
	srv, _, c := setup(t)
	l := mustObtain(t, c, "k", 300*time.Millisecond)

	srv.Pause()
	defer srv.Resume()
	waitClosed(t, l.Lost(), 2*time.Second, "Lost while Redis is paused")
	srv.Resume()
	if err := l.Release(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after loss: got %v, want ErrNotHeld", err)
	}
}

func TestMutex_Lost_closesWhenRedisIsKilled(t *testing.T) {
	srv, _, c := setup(t)
	l := mustObtain(t, c, "k", 300*time.Millisecond)
	srv.Kill()
	waitClosed(t, l.Lost(), 2*time.Second, "Lost after Redis died")
	err := l.Release(context.Background())
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("Release with Redis down: got %v, want ErrUnavailable", err)
	}
}

func TestMutex_withMaxHold_stopsRenewingAtTheCap(t *testing.T) {
	_, _, c := setup(t)
	ctx := context.Background()
	start := time.Now()
	l := mustObtain(t, c, "k", 100*time.Millisecond, lock.WithMaxHold(400*time.Millisecond))

	waitClosed(t, l.Lost(), 2*time.Second, "Lost at the hold cap")
	// Lost closes at the cap minus drift, by a timer: on a loaded machine
	// its goroutine may run a few ms late (seen: 402 ms with other tests
	// on both cores), which is the waiter's scheduling, not a renewal past
	// the cap — a renewal would have moved it by a whole ttl (100 ms).
	if held := time.Since(start); held < 300*time.Millisecond || held > 450*time.Millisecond {
		t.Fatalf("lost after %v; want it at the 400ms cap (minus drift)", held)
	}
	time.Sleep(20 * time.Millisecond)
	mustObtain(t, c, "k", time.Second).Release(ctx)
}

func TestMutex_fence_increasesEvenAfterItsCounterExpired(t *testing.T) {
	_, rdb, _ := setup(t)
	c := newClient(t, rdb, lock.Config{FenceRetention: time.Millisecond})
	ctx := context.Background()
	var last int64
	for i := range 20 {
		l := mustObtain(t, c, "k", time.Second)
		if l.Fence() <= last {
			t.Fatalf("obtain %d: fence %d after %d", i, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // let the counter expire
	}
	if n, _ := rdb.Exists(ctx, "fs:lock:{k}:fence").Result(); n != 0 {
		t.Fatalf("fence counter did not expire with a 1ms retention")
	}
}

func TestMutex_badInput_returnsInvalidWithoutPanic(t *testing.T) {
	_, rdb, c := setup(t)
	ctx := context.Background()
	var typedNil *redis.Client
	cases := []struct {
		name string
		c    *lock.Client
		key  string
		ttl  time.Duration
		opts []lock.Option
	}{
		{"nil client", lock.New(nil), "k", time.Second, nil},
		{"typed nil client", lock.New(typedNil), "k", time.Second, nil},
		{"empty key", c, "", time.Second, nil},
		{"key with brace", c, "a{b", time.Second, nil},
		{"huge key", c, string(make([]byte, 600)), time.Second, nil},
		{"zero ttl", c, "k", 0, nil},
		{"negative ttl", c, "k", -time.Second, nil},
		{"sub-millisecond ttl", c, "k", time.Microsecond, nil},
		{"negative max hold", c, "k", time.Second, []lock.Option{lock.WithMaxHold(-1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.c.TryObtain(ctx, tc.key, tc.ttl, tc.opts...); !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("TryObtain: got %v, want ErrInvalid", err)
			}
			if _, err := tc.c.Obtain(ctx, tc.key, tc.ttl, tc.opts...); !errors.Is(err, lock.ErrInvalid) {
				t.Errorf("Obtain: got %v, want ErrInvalid", err)
			}
		})
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("bad input wrote %d keys", n)
	}
	var nilClient *lock.Client
	if _, err := nilClient.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("TryObtain on a nil *Client: %v", err)
	}
	var nilMySQL *lock.MySQL
	if _, err := nilMySQL.Obtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Obtain on a nil *MySQL: %v", err)
	}
	var nilLock *lock.Lock
	if err := nilLock.Release(ctx); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Release of nil lock: got %v, want ErrInvalid", err)
	}
}

func TestMutex_redisDown_returnsUnavailable(t *testing.T) {
	srv, _, c := setup(t)
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryObtain: got %v, want ErrUnavailable", err)
	}
}

func TestMutex_Lost_closesWhenTheKeyIsDeletedBehindTheHoldersBack(t *testing.T) {
	_, rdb, c := setup(t)
	l := mustObtain(t, c, "k", 300*time.Millisecond)
	if err := rdb.Del(context.Background(), "fs:lock:{k}").Err(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Lost(), time.Second, "Lost after the key was deleted")
	if err := l.Release(context.Background()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release: got %v, want ErrNotHeld", err)
	}
}

// WithoutFence: fence 0, no counter key left in Redis, and still mutual
// exclusion, also across local handoffs (16 goroutines of one client) and
// between two clients.
func TestMutex_withoutFence_excludesAndLeavesNoKeys(t *testing.T) {
	srv, rdb, c := setup(t)
	other := newClient(t, srv.Client(t), lock.Config{})
	ctx := context.Background()
	var inside, overlaps, holds atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c
			if g%4 == 0 {
				cl = other
			}
			for range 25 {
				l, err := cl.Obtain(ctx, "user:7", time.Second, lock.WithoutFence())
				if err != nil {
					t.Error(err)
					return
				}
				if l.Fence() != 0 {
					t.Errorf("fence %d, want 0 WithoutFence", l.Fence())
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				holds.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 || holds.Load() != 16*25 {
		t.Fatalf("%d overlapping holds of %d", overlaps.Load(), holds.Load())
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after every release: %v", keys)
	}
	// The same key with fencing still mints.
	l := mustObtain(t, c, "user:7", time.Second)
	defer l.Release(ctx)
	if l.Fence() <= 0 {
		t.Fatalf("fence %d with fencing on", l.Fence())
	}
}
