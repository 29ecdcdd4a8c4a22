package embedded_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A read on the in-memory SQL server waits for the one write running, not
// for every write queued before it (issue 39: the public view, the admin's
// reads and /readyz queued behind the worker's upserts for up to a minute
// and answered 503). Six connections write without a pause, each write
// taking 300 ms; a seventh reads: its slowest read waits about one write,
// where a first-come lock made it wait for the six.
func TestStack_memory_aReadWaitsForTheWriteRunning_notEveryWriteQueued(t *testing.T) {
	_, db := startSQL(t)
	db.SetMaxOpenConns(20)
	const writers, write = 6, 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// SET is a write to the server's turns, as an upsert is.
				if _, err := db.ExecContext(context.Background(), "SET @slept = SLEEP(?)", write.Seconds()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Second) // the writes queue up
	var slowest time.Duration
	reads := 0
	for ctx.Err() == nil {
		start := time.Now()
		var one int
		if err := db.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(start))
		reads++
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if slowest > 2*write {
		t.Fatalf("the slowest of %d reads took %v behind %d writers of %v each; want at most about one write", reads, slowest, writers, write)
	}
	t.Logf("%d reads beside %d writers of %v: the slowest took %v", reads, writers, write, slowest)
}
