package lock_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// keysOnEveryMaster returns one lock name per master of the cluster.
func keysOnEveryMaster(t *testing.T, rc *redis.ClusterClient, prefix string, masters int) []string {
	t.Helper()
	seen := map[string]bool{}
	var keys []string
	for i := 0; len(keys) < masters; i++ {
		if i == 1000 {
			t.Fatalf("no lock names on %d masters after 1000 tries", masters)
		}
		name := prefix + string(rune('a'+i%26)) + string(rune('a'+i/26))
		// Every key of lock N carries the hash tag {N}: N's slot is the lock's.
		node, err := rc.MasterForKey(context.Background(), "{"+name+"}")
		if err != nil {
			t.Fatal(err)
		}
		if addr := node.Options().Addr; !seen[addr] {
			seen[addr] = true
			keys = append(keys, name)
		}
	}
	return keys
}

// Every kind of lock on a 3-master Redis Cluster, with a lock on each master:
// mutexes exclude (overlap log, fences increasing), the fair lock grants in
// arrival order on release notices alone (PUBLISH crosses the cluster; no
// polling), reentrant holds nest, a renewed short lock outlives its ttl, and
// Holder (a MULTI on one slot) answers.
func TestCluster_everyKind_onEachMaster(t *testing.T) {
	cluster := testenv.StartRedisCluster(t, 3)
	rc := cluster.Client(t)
	ctx := context.Background()
	keys := keysOnEveryMaster(t, rc, "k", 3)
	clients := []*lock.Client{
		newClient(t, cluster.Client(t), lock.Config{RecheckInterval: noRecheck}),
		newClient(t, cluster.Client(t), lock.Config{RecheckInterval: noRecheck}),
	}

	t.Run("mutex", func(t *testing.T) {
		until := time.Now().Add(1500 * time.Millisecond)
		var wg sync.WaitGroup
		logs := map[string]string{}
		for _, key := range keys {
			path := filepath.Join(t.TempDir(), key+".log")
			logs[key] = path
			log := openCritLog(t, path)
			for i := range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := contend(ctx, clients[i%2], key, log, "p/"+key, until); err != nil {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		for key, path := range logs {
			if n := checkCritLog(t, path)["p"]; n < 50 {
				t.Fatalf("%s: %d holds in 1.5 s", key, n)
			}
		}
	})

	t.Run("fair", func(t *testing.T) {
		for _, key := range keys {
			fs := []*lock.Fair{clients[0].Fair(), clients[1].Fair()}
			held, err := fs[0].TryObtain(ctx, key, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			queueInOrder(t, ctx, held, fs, key, 8)
		}
	})

	t.Run("reentrant", func(t *testing.T) {
		r := clients[0].Reentrant()
		for _, key := range keys {
			a := lock.WithOwner(ctx, "a")
			outer, err := r.TryObtain(a, key, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := r.TryObtain(a, key, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if h, err := r.Holder(a, key); err != nil || h.Count != 2 {
				t.Fatalf("%s: holder %+v, %v", key, h, err)
			}
			if _, err := clients[1].Reentrant().TryObtain(lock.WithOwner(ctx, "b"), key, time.Second); !errors.Is(err, lock.ErrNotObtained) {
				t.Fatalf("%s: another owner got a held lock: %v", key, err)
			}
			if err := inner.Release(a); err != nil {
				t.Fatal(err)
			}
			if err := outer.Release(a); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("renewal and holder", func(t *testing.T) {
		for _, key := range keys {
			l := mustObtain(t, clients[0], key, 300*time.Millisecond)
			time.Sleep(900 * time.Millisecond)
			h, err := clients[1].Holder(ctx, key)
			if err != nil || h.Fence != l.Fence() {
				t.Fatalf("%s after 3 ttls: holder %+v, %v; want fence %d", key, h, err, l.Fence())
			}
			select {
			case <-l.Lost():
				t.Fatalf("%s: lost while renewed", key)
			default:
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
