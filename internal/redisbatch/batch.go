// Package redisbatch sends the Lua scripts of concurrent callers to Redis
// together, in one pipeline (auto-pipelining, which go-redis does not do).
// The lock library's mutex and the order path's accept script use it.
package redisbatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher sends the scripts of concurrent callers to Redis together, in one
// pipeline, instead of one round trip each (auto-pipelining). Redis then
// reads and writes its socket once per batch rather than once per command,
// which is most of its CPU for short scripts, and the client saves as many
// syscalls. A flusher goroutine takes whatever is pending, sends it, hands
// out the answers, and repeats; calls that arrive while a batch is in flight
// form the next one. An idle caller pays one goroutine handoff.
type Batcher struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	pending []*call
	closed  bool
	wake    chan struct{} // cap 1: something is pending
	stop    chan struct{}
	once    sync.Once // starts the flusher
}

type call struct {
	deadline time.Time // zero: none
	script   *redis.Script
	keys     []string
	args     []any
	cmd      *redis.Cmd
	done     chan struct{}
}

// maxBatch bounds one pipeline, so one huge batch cannot hold everyone's
// answers back.
const maxBatch = 128

// defaultBatchTimeout bounds a batch whose callers set no deadline.
const defaultBatchTimeout = 10 * time.Second

// ErrClosed answers the calls still waiting when the batcher closed.
var ErrClosed = errors.New("redisbatch: closed")

// New returns a batcher over rdb; its flusher starts with the first call.
func New(rdb redis.UniversalClient) *Batcher {
	return &Batcher{rdb: rdb, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Run runs script like Script.Run, batched with other callers'. If ctx ends
// first it returns ctx's error and the script may still run: callers treat
// that like a lost answer.
func (b *Batcher) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &call{script: script, keys: keys, args: args, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	if b.closed {
		// After Close, calls go straight to Redis (a lock held when its
		// client closed must still be releasable).
		b.mu.Unlock()
		return script.Run(ctx, b.rdb, keys, args...)
	}
	b.once.Do(func() { go b.flush() })
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// Close stops the flusher; calls still pending fail with ErrClosed, later
// calls go to Redis directly.
func (b *Batcher) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	close(b.stop)
	for _, c := range b.pending {
		c.cmd = redis.NewCmd(context.Background())
		c.cmd.SetErr(ErrClosed)
		close(c.done)
	}
	b.pending = nil
}

func (b *Batcher) flush() {
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			return
		}
		for {
			b.mu.Lock()
			n := min(len(b.pending), maxBatch)
			batch := b.pending[:n:n]
			b.pending = b.pending[n:]
			b.mu.Unlock()
			if n == 0 {
				break
			}
			b.send(batch)
		}
	}
}

// send runs one batch in a pipeline. Scripts Redis does not know yet
// (NOSCRIPT, after a restart or SCRIPT FLUSH) are rerun one by one with
// Script.Run, which loads them.
func (b *Batcher) send(batch []*call) {
	// The batch lives as long as its most patient caller: the earliest
	// deadline would cut the others short. Callers leave on their own
	// deadlines regardless.
	latest := time.Time{}
	for _, c := range batch {
		if c.deadline.IsZero() {
			latest = time.Now().Add(defaultBatchTimeout)
			break
		}
		if c.deadline.After(latest) {
			latest = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	defer cancel()

	pipe := b.rdb.Pipeline()
	for _, c := range batch {
		c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && isNoScript(err) {
			c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
		close(c.done)
	}
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}
