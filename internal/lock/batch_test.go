package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

var echoScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

func TestBatcher_concurrentCalls_eachGetTheirOwnAnswer_evenAcrossScriptFlush(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := newBatcher(rdb)
	defer b.close()
	ctx := context.Background()
	var wg sync.WaitGroup
	seen := make([]map[int64]bool, 16)
	for g := range 16 {
		seen[g] = map[int64]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := string(rune('a' + g))
			for i := range 200 {
				if g == 0 && i == 100 {
					rdb.ScriptFlush(ctx) // the batcher must reload, not fail
				}
				n, err := b.run(ctx, echoScript, []string{key}).Int64()
				if err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
				if n != int64(i+1) {
					t.Errorf("goroutine %d call %d got %d: answers were mixed up", g, i, n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestBatcher_callerThatGivesUp_returnsAtItsDeadline(t *testing.T) {
	srv := testenv.StartRedis(t)
	b := newBatcher(srv.Client(t))
	defer b.close()
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.run(ctx, echoScript, []string{"k"}).Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the caller's deadline", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("returned after %v, deadline was 100ms", d)
	}
}

func TestBatcher_close_failsPendingAndLaterCalls(t *testing.T) {
	srv := testenv.StartRedis(t)
	b := newBatcher(srv.Client(t))
	srv.Pause()
	defer srv.Resume()
	res := make(chan error, 2)
	for range 2 {
		go func() { res <- b.run(context.Background(), echoScript, []string{"k"}).Err() }()
	}
	time.Sleep(50 * time.Millisecond)
	b.close()
	// The batch in flight ends when the paused server's socket times out;
	// calls still pending fail at once.
	for range 2 {
		select {
		case err := <-res:
			if err == nil {
				t.Fatal("a call succeeded against a paused server")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a caller without a deadline hung after close")
		}
	}
	if err := b.run(context.Background(), echoScript, []string{"k"}).Err(); !errors.Is(err, errClosed) {
		t.Fatalf("call after close: %v", err)
	}
}
