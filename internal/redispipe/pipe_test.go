package redispipe

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

var echoScript = redis.NewScript(`return redis.call('INCR', KEYS[1])`)

func TestPipe_concurrentCalls_eachGetTheirOwnAnswer_evenAcrossScriptFlush(t *testing.T) {
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
					rdb.ScriptFlush(ctx) // the pipe must reload, not fail
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

func TestPipe_callerThatGivesUp_returnsAtItsDeadline(t *testing.T) {
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
func TestPipe_close_sendsPendingCalls_laterCallsGoDirect(t *testing.T) {
	srv := testenv.StartRedis(t)
	b := New(srv.Client(t))
	srv.Pause()
	res := make(chan error, 2)
	// The first goes out and hangs on the paused server; the second waits for it.
	go func() { res <- b.Run(context.Background(), echoScript, []string{"k"}).Err() }()
	time.Sleep(20 * time.Millisecond)
	waitPending(t, b, 0)
	go func() { res <- b.Run(context.Background(), echoScript, []string{"k"}).Err() }()
	waitPending(t, b, 1)
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

// Callers that left while Redis stalled are not run when it recovers: only
// the call in flight during the stall reaches Redis, not the 100 that gave up
// behind it.
func TestPipe_callersThatLeft_areNotSentLater(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	if err := b.Run(ctx, echoScript, []string{"n"}).Err(); err != nil { // loads the script
		t.Fatal(err)
	}
	srv.Pause()
	begun := b.sending.Load()
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		first <- b.Run(ctx, echoScript, []string{"n"}).Err()
	}()
	waitSending(t, b, begun) // the first call is in flight
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Cancelled, not timed out: an HTTP client that hangs up leaves
			// a request context without a deadline.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			time.AfterFunc(50*time.Millisecond, cancel)
			if err := b.Run(ctx, echoScript, []string{"n"}).Err(); err == nil {
				t.Error("a call answered while Redis was paused")
			}
		}()
	}
	wg.Wait()
	srv.Resume()
	if err := <-first; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	// Anything still pending would be sent now; one more call goes after it.
	if n, err := b.Run(ctx, echoScript, []string{"n"}).Int64(); err != nil || n != 3 {
		t.Fatalf("counter %d (%v), want 3: the load, the call in flight, this one — not the 100 that left", n, err)
	}
}

// A caller cancelled (not timed out) after its call went out gets the
// call's answer, not its ctx's error: the script ran, and the caller must
// know what it did (an accepted order is handed to the task relay only if
// its accept's answer arrives). A caller cancelled before its call went out
// gets the error, and the call never runs.
func TestPipe_cancelledCaller_getsTheAnswerOfACallInFlight_andNoRunOfOneNotSent(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	b := New(rdb)
	defer b.Close()
	bg := context.Background()
	if err := b.Run(bg, echoScript, []string{"n"}).Err(); err != nil { // loads the script
		t.Fatal(err)
	}
	for _, withDeadline := range []bool{false, true} {
		srv.Pause()
		begun := b.sending.Load()
		parent := bg
		if withDeadline {
			var stop context.CancelFunc
			parent, stop = context.WithTimeout(bg, 10*time.Second)
			defer stop()
		}
		ctx, cancel := context.WithCancel(parent)
		inFlight := make(chan *redis.Cmd, 1)
		go func() { inFlight <- b.Run(ctx, echoScript, []string{"n"}) }()
		waitSending(t, b, begun) // in the paused server's socket
		// A second call waits behind it; its caller leaves before it is sent.
		ctx2, cancel2 := context.WithCancel(bg)
		notSent := make(chan *redis.Cmd, 1)
		go func() { notSent <- b.Run(ctx2, echoScript, []string{"never"}) }()
		waitPending(t, b, 1)
		cancel()
		cancel2()
		if err := (<-notSent).Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("deadline %v: the call not yet sent: %v, want context.Canceled", withDeadline, err)
		}
		select {
		case cmd := <-inFlight:
			t.Fatalf("deadline %v: the call in flight answered %v while Redis was paused", withDeadline, cmd)
		case <-time.After(100 * time.Millisecond):
		}
		srv.Resume()
		n, err := (<-inFlight).Int64()
		if err != nil || n < 2 {
			t.Fatalf("deadline %v: the call in flight: %d, %v; want the counter it set", withDeadline, n, err)
		}
		if got := rdb.Get(bg, "n").Val(); got != strconv.FormatInt(n, 10) {
			t.Fatalf("deadline %v: counter %s, answer %d", withDeadline, got, n)
		}
	}
	if n, err := rdb.Exists(bg, "never").Result(); err != nil || n != 0 {
		t.Fatalf("the calls whose callers left before they were sent ran: %d, %v", n, err)
	}
}
