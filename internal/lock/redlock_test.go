package lock_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func redlockNodes(t *testing.T, n int) ([]*testenv.RedisServer, []redis.UniversalClient) {
	t.Helper()
	srvs := testenv.StartRedisN(t, n)
	var clients []redis.UniversalClient
	for _, s := range srvs {
		clients = append(clients, s.Client(t))
	}
	return srvs, clients
}

func newRedlock(t *testing.T, nodes []redis.UniversalClient) *lock.Redlock {
	t.Helper()
	r := lock.NewRedlock(nodes, lock.RedlockConfig{})
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRedlock_fiveNodes_worksWithTwoKilled(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	r, other := newRedlock(t, nodes), newRedlock(t, nodes)
	ctx := context.Background()
	srvs[0].Kill()
	srvs[3].Kill()

	l, err := r.TryObtain(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatalf("with 3 of 5 nodes up: %v", err)
	}
	if _, err := other.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second holder: %v", err)
	}
	if h, err := other.Holder(ctx, "k"); err != nil || h.Fence != l.Fence() || h.TTL <= 0 {
		t.Fatalf("Holder on the live majority: %+v, %v", h, err)
	}
	time.Sleep(time.Second) // renewal keeps it on the majority
	assertOpen(t, l.Lost(), "Lost of a Redlock renewed on 3 of 5 nodes")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l2, err := other.TryObtain(ctx, "k", time.Second); err != nil {
		t.Fatalf("after release: %v", err)
	} else if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
	}
}

func TestRedlock_fiveNodes_failsCleanlyWithThreeKilled(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	r := newRedlock(t, nodes)
	for _, i := range []int{0, 2, 4} {
		srvs[i].Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.TryObtain(ctx, "k", time.Second)
	if !errors.Is(err, lock.ErrNoQuorum) || !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryObtain with 2 of 5 up: %v, want ErrNoQuorum (and ErrUnavailable)", err)
	}
	quick := lock.NewRedlock(nodes, lock.RedlockConfig{QuorumWait: 300 * time.Millisecond})
	defer quick.Close()
	start := time.Now()
	if _, err := quick.Obtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNoQuorum) {
		t.Fatalf("Obtain with 2 of 5 up: %v, want ErrNoQuorum", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 1300*time.Millisecond {
		t.Fatalf("Obtain took %v to fail: it should ride out QuorumWait (300ms) and then stop waiting for a quorum that is not there", d)
	}
	// The two live nodes must not keep a half-taken lock.
	for _, i := range []int{1, 3} {
		if n := srvs[i].Client(t).Exists(ctx, "fs:redlock:{k}").Val(); n != 0 {
			t.Fatalf("node %d kept the key after a failed obtain", i)
		}
	}
}

// A majority that stops answering for less than QuorumWait is ridden out:
// Obtain succeeds once the nodes are back.
func TestRedlock_majorityPausedBriefly_obtainWaitsItOut(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	r := lock.NewRedlock(nodes, lock.RedlockConfig{QuorumWait: 3 * time.Second})
	defer r.Close()
	for _, i := range []int{0, 1, 2} {
		srvs[i].Pause()
	}
	resumed := make(chan time.Time, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		resumed <- time.Now()
		for _, i := range []int{0, 1, 2} {
			srvs[i].Resume()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.Obtain(ctx, "k", time.Second)
	obtained := time.Now()
	if err != nil {
		t.Fatalf("Obtain across a 400ms outage of 3 of 5 nodes: %v", err)
	}
	defer l.Release(ctx)
	if at := <-resumed; obtained.Before(at) {
		t.Fatalf("obtained %v before the nodes were resumed", at.Sub(obtained))
	}
	if _, err := r.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second holder: %v", err)
	}
}

func TestRedlock_majorityLostWhileHeld_closesLost(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	r := newRedlock(t, nodes)
	// Obtaining is the setup, not what is tested: a loaded machine's node
	// can miss the short per-node timeout (CI saw "2 of 5 nodes answered"
	// once), so it is tried a few times.
	var l *lock.Lock
	var err error
	for try := 0; try < 10; try++ {
		if l, err = r.TryObtain(context.Background(), "k", 300*time.Millisecond); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 3} {
		srvs[i].Kill()
	}
	waitClosed(t, l.Lost(), time.Second, "Lost after 3 of 5 nodes died")
}

// The fence minted by a node outside the next majority still bounds the
// next fence: the first holder raised a majority of counters to its fence.
func TestRedlock_fence_increasesAcrossDifferentMajorities(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	r := newRedlock(t, nodes)
	ctx := context.Background()
	// Node 0's counter is far ahead of the others.
	srvs[0].Client(t).Set(ctx, "fs:redlock:{k}:fence", "5000000000000000", 0)
	first, err := r.TryObtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first.Release(ctx)
	srvs[0].Kill()
	second, err := r.TryObtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if second.Fence() <= first.Fence() {
		t.Fatalf("fence %d after %d: the majority without node 0 was not raised", second.Fence(), first.Fence())
	}
}

// Three Redlock clients with four goroutines each contend while one node at
// a time is paused and resumed: never two holders, fences increasing.
func TestRedlock_pausedAndResumedNodes_neverTwoHolders(t *testing.T) {
	srvs, nodes := redlockNodes(t, 5)
	path := filepath.Join(t.TempDir(), "crit.log")
	log := openCritLog(t, path)
	stop := time.Now().Add(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	holds := make([]atomic.Int64, 3)
	for ci := range 3 {
		r := newRedlock(t, nodes)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("c%d/%d", ci, g)
				for time.Now().Before(stop) {
					l, err := r.Obtain(ctx, "k", 500*time.Millisecond)
					if err != nil {
						t.Errorf("%s: %v", who, err)
						return
					}
					log.write("E", l.Fence(), who)
					holds[ci].Add(1)
					time.Sleep(time.Millisecond)
					log.write("X", l.Fence(), who)
					l.Release(ctx)
				}
			}()
		}
	}
	for _, i := range []int{0, 2} {
		time.Sleep(500 * time.Millisecond)
		srvs[i].Pause()
		time.Sleep(700 * time.Millisecond)
		srvs[i].Resume()
	}
	wg.Wait()
	checkCritLog(t, path)
	for i := range holds {
		if holds[i].Load() == 0 {
			t.Fatalf("client %d never held the lock", i)
		}
	}
}
