package redisbatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// pipeCounter counts pipelines that carried more than one EVALSHA (not
// any pipeline: go-redis opens each connection with a pipeline of two
// CLIENT SETINFO commands).
type pipeCounter struct{ shared atomic.Int64 }

func (p *pipeCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			if c.Name() == "evalsha" {
				n++
			}
		}
		if n > 1 {
			p.shared.Add(1)
		}
		return next(ctx, cmds)
	}
}

// redis_rate over the batched client: 200 concurrent requests against a
// limit of 10 a minute are allowed exactly 10 times (the limit holds when
// scripts share pipelines), also after SCRIPT FLUSH (the NOSCRIPT answer
// reaches redis.Script, which falls back to EVAL), and the scripts did
// share pipelines.
func TestClient_rateLimiterOverBatchedEvalSha_exactLimitAndShared(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	hooks := &pipeCounter{}
	rdb.AddHook(hooks)
	b := New(rdb)
	defer b.Close()
	limiter := redis_rate.NewLimiter(NewClient(rdb, b))
	ctx := context.Background()
	for round, flush := range []bool{false, true} {
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		key := []string{"user:1", "user:2"}[round]
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := limiter.Allow(ctx, key, redis_rate.PerMinute(10))
				if err != nil {
					t.Error(err)
					return
				}
				if res.Allowed > 0 {
					allowed.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := allowed.Load(); n != 10 {
			t.Fatalf("round %d (script flushed: %v): %d of 200 allowed, want 10", round, flush, n)
		}
	}
	if hooks.shared.Load() == 0 {
		t.Fatal("no pipeline carried more than one script: nothing was batched")
	}
}

// Callers that left while Redis stalled are not run when it recovers: only
// the call in flight during the stall reaches Redis, not the 100 that gave up
// behind it.
func TestBatcher_callersThatLeft_areNotSentLater(t *testing.T) {
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
	// Wait until the batching loop has taken the first call: it is in flight, and
	// the loop waits on it.
	for b.sending.Load() == begun {
		time.Sleep(time.Millisecond)
	}
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
