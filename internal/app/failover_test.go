package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// answer is what a client app was finally told, after its retries.
type answer struct {
	code    int
	errCode string
	orderNo string
	took    time.Duration // from the first attempt
	slowest time.Duration // the longest single attempt
	retries int           // 5xx answers before this one
}

// placeRetrying places an order as a client app should: with an
// Idempotency-Key, sending the same request again after a 5xx (honouring
// Retry-After, capped) or a transport error, until an answer that is not
// 5xx or the deadline.
func (s *stack) placeRetrying(user, act int64, key string, deadline time.Time) answer {
	start := time.Now()
	a := answer{}
	for {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/activities/%d/orders", s.base, act), strings.NewReader(`{"quantity":1}`))
		req.Header.Set("Authorization", s.bearer(user))
		req.Header.Set("Idempotency-Key", key)
		sent := time.Now()
		code, body, retryAfter := s.do(req)
		a.slowest = max(a.slowest, time.Since(sent))
		if code != 0 && code < 500 || time.Now().After(deadline) {
			a.code, a.took = code, time.Since(start)
			if e, ok := body["error"].(map[string]any); ok {
				a.errCode, _ = e["code"].(string)
			}
			a.orderNo, _ = body["order_no"].(string)
			return a
		}
		a.retries++
		time.Sleep(min(retryAfter, 200*time.Millisecond))
	}
}

// payRetrying pays as a client app should: again after a 5xx; a 409 after
// a 5xx may mean the earlier attempt landed, so the app asks for the order.
// It reports whether the order ended paid by this client's doing.
func (s *stack) payRetrying(user int64, no string, deadline time.Time) bool {
	retried := false
	for {
		req, _ := http.NewRequest("POST", s.base+"/v1/orders/"+no+"/pay", nil)
		req.Header.Set("Authorization", s.bearer(user))
		code, _, retryAfter := s.do(req)
		switch {
		case code == 200:
			return true
		case code == 409 && retried:
			r := s.call("GET", "/v1/orders/"+no, s.bearer(user), "")
			return r.code == 200 && r.str("status") == "paid"
		case code != 0 && code < 500 || time.Now().After(deadline):
			return false
		}
		retried = true
		time.Sleep(min(retryAfter, 200*time.Millisecond))
	}
}

// do sends req and returns the status (0 for a transport error), the JSON
// body, and the Retry-After it asked for (a second when none).
func (s *stack) do(req *http.Request) (int, map[string]any, time.Duration) {
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, map[string]any{}, 100 * time.Millisecond
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
		s.t.Errorf("503 without Retry-After: %s", raw)
	}
	return resp.StatusCode, body, time.Second
}

// A primary, a replica and three sentinels; the api and the worker, each
// its own OS process, acknowledge a change only once the replica holds it
// (REDIS_ACK_REPLICAS=1). A crowd orders (one each), every third pays, and
// every client retries a 5xx with the same Idempotency-Key; the primary is
// killed -9 mid-run, and restarted (as an operator would) once the
// sentinels have promoted the replica; the worker is killed -9 with it and
// started again once the new primary is named. After: every order answered
// 202 is in MySQL exactly once, every order answered paid is paid there,
// nobody holds two, Redis and MySQL agree, and sales resumed.
func TestFailover_primaryKilled9_every202Survives(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"REDIS_SENTINEL": "1", "REDIS_ACK_REPLICAS": "1", "API_PROCESS": "1"})
	worker := s.workerProcess(t.Name())
	act := s.sale(100_000, 1, 900)
	const users = 600
	var (
		mu          sync.Mutex
		accepted    = map[string]int64{} // order no → user, answered 202
		paid        = map[string]bool{}
		refused     = map[string]int{}
		done        atomic.Int64
		killedAt    atomic.Int64 // unix ns
		resumedAt   atomic.Int64 // first 202 to a request sent after the kill
		unavailable atomic.Int64
		slowest     atomic.Int64 // ns, the longest single request
	)
	deadline := time.Now().Add(90 * time.Second)
	next := make(chan int64, users)
	for u := int64(1); u <= users; u++ {
		next <- u
	}
	close(next)
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				sent := time.Now().UnixNano()
				a := s.placeRetrying(u, act, fmt.Sprintf("tap-%d", u), deadline)
				unavailable.Add(int64(a.retries))
				for cur := slowest.Load(); int64(a.slowest) > cur && !slowest.CompareAndSwap(cur, int64(a.slowest)); cur = slowest.Load() {
				}
				if a.code != 202 {
					mu.Lock()
					refused[fmt.Sprintf("%d %s", a.code, a.errCode)]++
					mu.Unlock()
					continue
				}
				if k := killedAt.Load(); k != 0 && sent > k {
					resumedAt.CompareAndSwap(0, time.Now().UnixNano())
				}
				ok := u%3 == 0 && s.payRetrying(u, a.orderNo, deadline)
				mu.Lock()
				accepted[a.orderNo] = u
				if ok {
					paid[a.orderNo] = true
				}
				mu.Unlock()
				done.Add(1)
			}
		}()
	}
	for done.Load() < users/3 {
		select {
		case <-s.apiChild.Exited():
			t.Fatalf("the api died by itself:\n%s", s.apiChild.Output())
		case <-worker.Exited():
			t.Fatalf("the worker died by itself:\n%s", worker.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d users served before the kill", done.Load(), users/3)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := s.sg.Primary.Addr()
	killedAt.Store(time.Now().UnixNano())
	s.sg.Primary.Kill()
	// The worker dies with it, mid-task: what it had taken from the queue
	// and not finished comes back (asynq's lease, the reconciler).
	worker.Kill()
	promoted, err := s.sg.WaitPrimaryOtherThan(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	failedOver := time.Since(time.Unix(0, killedAt.Load()))
	s.workerProcess(t.Name()) // started again: it asks the sentinels for the primary
	// The operator restarts the old primary as a replica of the new one (a
	// sentinel would convert it too, but only at its next INFO round, up to
	// 10 s later); until a replica is back, acknowledged writes wait.
	s.sg.Primary.RestartReplicaOf(promoted)
	wg.Wait()
	if len(refused) > 0 {
		t.Fatalf("answers that were neither 202 nor resolved by retrying: %v", refused)
	}
	if resumedAt.Load() == 0 {
		t.Fatal("no order was accepted after the kill")
	}
	t.Logf("%d orders answered 202 (%d paid) after %d 5xx answers retried; primary %s killed, %s promoted after %v, "+
		"the first 202 to a request sent after the kill came %v after it; the slowest single request took %v",
		len(accepted), len(paid), unavailable.Load(), old, promoted, failedOver.Round(10*time.Millisecond),
		time.Duration(resumedAt.Load()-killedAt.Load()).Round(10*time.Millisecond), time.Duration(slowest.Load()).Round(10*time.Millisecond))
	// No request hangs past a client's patience while there is no primary:
	// it is answered (503, retried) by REQUEST_TIMEOUT (3 s), give or take
	// a lock's release (up to 1 s) and a loaded machine's scheduling.
	if d := time.Duration(slowest.Load()); d > 5*time.Second {
		t.Fatalf("a request took %v during the failover: want REQUEST_TIMEOUT (3 s) and at most 2 s more", d)
	}

	// The killed worker's tasks come back when their lease expires or the
	// reconciler finds their orders (the TestOrders_workerKilled9 case):
	// longer than checkInvariants waits.
	s.waitPersisted(act, int64(len(accepted)), 90*time.Second)
	s.checkInvariants(act, int64(len(accepted)))
	for no := range accepted {
		if n := s.count("SELECT COUNT(*) FROM orders WHERE order_no = ?", no); n != 1 {
			t.Fatalf("order %s answered 202 is in MySQL %d times", no, n)
		}
	}
	for no := range paid {
		if n := s.count("SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'paid'", no); n != 1 {
			t.Fatalf("order %s answered paid is not paid in MySQL", no)
		}
	}
	if n := s.count("SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE activity_id = ? GROUP BY user_id HAVING COUNT(*) > 1) d", act); n != 0 {
		t.Fatalf("%d users hold two orders", n)
	}
}

// One Redis, no replica, appendfsync always: killed -9 while orders flow
// and restarted from its append-only file, it has every order answered 202,
// and each reaches MySQL. The api and the worker are processes of their
// own. (With everysec there is no such test: Redis then postpones its
// append-only write, up to 2 s, while a background fsync is running, and
// replies meanwhile — docs/deploy.md, "Redis durability".)
func TestDurability_appendfsyncAlways_redisKilled9_every202Kept(t *testing.T) {
	s := newStackWith(t, "", map[string]string{"REDIS_APPENDFSYNC": "always", "API_PROCESS": "1"})
	s.workerProcess(t.Name())
	act := s.sale(100_000, 1, 900)
	const users = 400
	var mu sync.Mutex
	accepted := map[string]bool{}
	var done atomic.Int64
	deadline := time.Now().Add(90 * time.Second)
	next := make(chan int64, users)
	for u := int64(1); u <= users; u++ {
		next <- u
	}
	close(next)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				if a := s.placeRetrying(u, act, fmt.Sprintf("tap-%d", u), deadline); a.code == 202 {
					mu.Lock()
					accepted[a.orderNo] = true
					mu.Unlock()
				}
				done.Add(1)
			}
		}()
	}
	for done.Load() < users/3 {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	before := len(accepted)
	mu.Unlock()
	s.redis.Kill()
	time.Sleep(time.Second)
	s.redis.Restart()
	wg.Wait()
	t.Logf("redis-server killed -9 after %d orders answered 202, restarted from its AOF a second later; %d in all", before, len(accepted))
	rdb := s.rdb()
	for no := range accepted {
		if st := redisstore.RecordStatus(rdb.HGet(context.Background(), rediskeys.For(act).Orders, no).Val()); st != "pending_payment" {
			t.Fatalf("order %s answered 202 is %q in Redis after the restart", no, st)
		}
	}
	if len(accepted) != users {
		t.Fatalf("%d of %d users got a 202 after retrying", len(accepted), users)
	}
	s.checkInvariants(act, int64(len(accepted)))
}
