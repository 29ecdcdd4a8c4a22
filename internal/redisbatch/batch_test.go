package redisbatch

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
	b := New(rdb)
	defer b.Close()
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
				n, err := b.Run(ctx, echoScript, []string{key}).Int64()
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
	b := New(srv.Client(t))
	defer b.Close()
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := b.Run(ctx, echoScript, []string{"k"}).Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the caller's deadline", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("returned after %v, deadline was 100ms", d)
	}
}

// Close sends the calls still waiting before it returns (here: once the
// paused server is back); later calls go straight to Redis.
func TestBatcher_close_sendsPendingCalls_laterCallsGoDirect(t *testing.T) {
	srv := testenv.StartRedis(t)
	b := New(srv.Client(t))
	srv.Pause()
	res := make(chan error, 2)
	pending := func(n int) { // wait until exactly n calls wait for the loop
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); b.loop.Pending() != n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls pending, want %d", b.loop.Pending(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The first goes out and hangs on the paused server; the second waits for it.
	go func() { res <- b.Run(context.Background(), echoScript, []string{"k"}).Err() }()
	time.Sleep(20 * time.Millisecond)
	pending(0)
	go func() { res <- b.Run(context.Background(), echoScript, []string{"k"}).Err() }()
	pending(1)
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while a call was still waiting to be sent")
	default:
	}
	srv.Resume()
	for range 2 {
		if err := <-res; err != nil {
			t.Fatalf("a call pending at Close: %v, want sent", err)
		}
	}
	<-closed
	if err := b.Run(context.Background(), echoScript, []string{"k"}).Err(); err != nil {
		t.Fatalf("a call after close (e.g. releasing a lock held across Close): %v", err)
	}
}
