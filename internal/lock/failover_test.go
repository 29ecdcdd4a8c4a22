package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A failover that loses the holder's lock key (the replica never got it)
// lets another client obtain the lock on the new primary: no Redis lock
// can prevent that. What the mutex guarantees instead: the new holder's
// fence is above the old one's, though the fence counter lost that
// increment too (fences never fall below the server clock in µs), so a
// resource that checks fences refuses the old holder; and the old holder
// learns it lost the lock (Lost closes) at its next renewal.
func TestMutex_failoverLosingTheKey_fencesStillIncrease_oldHolderToldLost(t *testing.T) {
	g := testenv.StartSentinelGroup(t, testenv.RedisConfig{}, 1, 3)
	a := newClient(t, g.Client(t), lock.Config{})
	b := newClient(t, g.Client(t), lock.Config{})
	ctx := context.Background()
	const ttl = 3 * time.Second
	// The key was locked before, and its fence counter is on the replica:
	// a counter alone would hand the lost fence out again.
	if err := mustObtain(t, a, "stock:42", ttl).Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A write then WAIT on one connection: the replica has all before it.
	if _, err := g.Client(t).Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "probe", 1, 0)
		p.Do(ctx, "WAIT", 1, 5000)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var held *lock.Lock
	promoted := g.FailOverLosing(t, func() { held = mustObtain(t, a, "stock:42", ttl) })
	if n := g.Client(t).Exists(ctx, "fs:lock:{stock:42}").Val(); n != 0 {
		t.Fatalf("the new primary %s has the lock key: the failover did not lose it (test premise)", promoted)
	}
	var next *lock.Lock
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if next, err = b.TryObtain(ctx, "stock:42", ttl); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no obtain on the new primary: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if next.Fence() <= held.Fence() {
		t.Fatalf("fence %d after the failover, %d before: a fenced resource would take the old holder's writes", next.Fence(), held.Fence())
	}
	waitClosed(t, held.Lost(), 2*ttl, "the old holder's Lost after the failover")
	t.Logf("fence before %d, after %d; the old holder was told it lost the lock", held.Fence(), next.Fence())
}
