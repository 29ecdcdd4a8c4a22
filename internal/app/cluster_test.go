package app_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The whole service on a 3-master Redis Cluster (REDIS_CLUSTER=true): sales
// whose slots live on different masters sell exactly their stock, pay,
// cancel and the payment timeout (asynq's scheduled tasks) move stock back,
// a group buy forms and succeeds, the worker persists everything and the
// invariant checker (reading every master) finds nothing broken.
func TestCluster_salesGroupsAndTimeouts_onThreeMasters(t *testing.T) {
	waits(t)
	s := newClusterStack(t)
	s.worker()
	ctx := context.Background()
	rc := s.rdb().(*redis.ClusterClient)

	// Activities until two of them live on different masters.
	var acts []int64
	masters := map[string]bool{}
	for len(acts) < 4 || len(masters) < 2 {
		if len(acts) == 12 {
			t.Fatalf("12 activities all on %v", masters)
		}
		id := s.sale(30, 1, 20)
		acts = append(acts, id)
		node, err := rc.MasterForKey(ctx, fmt.Sprintf("fs:{act:%d}:meta", id))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	t.Logf("%d sales on masters %v", len(acts), masters)

	// 60 users race for 30 units in each sale at once.
	type accepted struct {
		user int64
		no   string
	}
	won := make([][]accepted, len(acts))
	var mu sync.Mutex
	var refused atomic.Int64
	var wg sync.WaitGroup
	for i, act := range acts {
		for u := int64(1); u <= 60; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.order(u, act, 1)
				switch {
				case r.code == 202:
					mu.Lock()
					won[i] = append(won[i], accepted{u, r.str("order_no")})
					mu.Unlock()
				case r.code == 409 && r.errCode() == "SOLD_OUT":
					refused.Add(1)
				default:
					t.Errorf("order: %d %v", r.code, r.body)
				}
			}()
		}
	}
	wg.Wait()
	for i := range acts {
		if len(won[i]) != 30 {
			t.Fatalf("sale %d accepted %d orders for 30 units", acts[i], len(won[i]))
		}
	}
	if refused.Load() != int64(30*len(acts)) {
		t.Fatalf("%d SOLD_OUT answers, want %d", refused.Load(), 30*len(acts))
	}

	// In each sale: 10 pay, 5 cancel, 15 are left to time out (20 s). The
	// sales go side by side: one after another, 60 calls under -race on a
	// slow VM once took longer than the payment window (CI, 2026-11-30:
	// "the payment time is over" for the last sale's payments).
	var paid sync.WaitGroup
	for i := range acts {
		paid.Add(1)
		go func() {
			defer paid.Done()
			for j, o := range won[i] {
				switch {
				case j < 10:
					if r := s.pay(o.user, o.no); r.code != 200 {
						t.Errorf("pay: %d %v", r.code, r.body)
					}
				case j < 15:
					if r := s.call("POST", "/v1/orders/"+o.no+"/cancel", s.bearer(o.user), ""); r.code != 200 {
						t.Errorf("cancel: %d %v", r.code, r.body)
					}
				}
			}
		}()
	}
	paid.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, act := range acts {
		if left := s.stockLeft(act); left != 5 {
			t.Fatalf("sale %d: %d left after 5 cancels, want 5", act, left)
		}
	}
	// A cancelled unit sells again: a new user gets it.
	if r := s.order(1000, acts[0], 1); r.code != 202 {
		t.Fatalf("order after a cancel: %d %v", r.code, r.body)
	}

	// A group buy of 3 forms and succeeds on its last payment.
	gb := s.groupBuy(50, 1, 3, 600, 600)
	gid, members := s.fill(gb, 3, 2000)
	for _, m := range members {
		if r := s.pay(m.user, m.no); r.code != 200 {
			t.Fatalf("group pay: %d %v", r.code, r.body)
		}
	}
	s.waitGroup(gid, "succeeded", 10*time.Second)
	s.waitMySQL(1, 30*time.Second, "SELECT COUNT(*) FROM `groups` WHERE group_id = ? AND status = 'succeeded' AND paid = 3", gid)

	// The unpaid orders time out (the one placed after a cancel too): every
	// unit not paid for is back.
	deadline := time.Now().Add(40 * time.Second)
	for _, act := range acts {
		for s.stockLeft(act) != 20 {
			if time.Now().After(deadline) {
				t.Fatalf("sale %d: %d left, want 30 − 10 paid once the unpaid orders timed out", act, s.stockLeft(act))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, act := range append(acts, gb) {
		s.checkInvariants(act, -1)
	}
	for i, act := range acts {
		cancelled := int64(20) // 5 cancelled + 15 timed out
		if i == 0 {
			cancelled++
		}
		s.waitMySQL(cancelled, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE status = 'cancelled' AND activity_id = ?", act)
		s.waitMySQL(10, 30*time.Second, "SELECT COUNT(*) FROM orders WHERE status = 'paid' AND activity_id = ?", act)
	}
}
