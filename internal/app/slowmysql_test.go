package app_test

import (
	"sync"
	"testing"
	"time"
)

// A backlog of orders drains into a MariaDB made slow (5 ms a row: a
// trigger that sleeps, so the worker's statements take seconds at first
// and then what its pace aims at) while the public view, an admin view
// and /readyz are asked every second: every answer is a 200 within
// REQUEST_TIMEOUT, and every order lands, exactly once. Reads do not queue
// behind the writes on MariaDB (the api's and the worker's pools are their
// own, and InnoDB reads without the writes' locks); in issue 39 they did on
// embedded mode's in-memory server, which TestStack_memory_aReadWaits… and
// the embedded sales' tests hold.
func TestOrders_backlogDrainingIntoASlowMariaDB_readsAnswerThroughout(t *testing.T) {
	waits(t)
	s := newStack(t, "")
	const n = 2000
	act := s.sale(n, 1, 900)
	if _, err := s.db.Exec("CREATE TRIGGER orders_slow BEFORE INSERT ON orders FOR EACH ROW SET @slept = SLEEP(0.005)"); err != nil {
		t.Fatal(err)
	}
	// The backlog: every order accepted before a worker runs.
	var wg sync.WaitGroup
	users := make(chan int64, n)
	for u := range n {
		users <- int64(u + 1)
	}
	close(users)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range users {
				if r := s.order(u, act, 1); r.code != 202 {
					t.Errorf("order of user %d: %d %v", u, r.code, r.body)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	p := startPolling(t, s.api, act)
	start := time.Now()
	s.worker()
	s.waitPersisted(act, n, 3*time.Minute)
	polls := p.stop()
	t.Logf("%d orders drained in %v into a MariaDB taking 5 ms a row; %d route polls meanwhile, all 200", n,
		time.Since(start).Round(100*time.Millisecond), polls)
	s.checkInvariants(act, n)
}
