// Package redispipe sends the Lua scripts of concurrent callers to Redis
// together, in one pipeline (auto-pipelining, which go-redis does not do),
// on the one batching loop (internal/batch), and runs the calls of a merged
// script (luascript.Merged) in one pipeline as one EVALSHA. Its users: the
// order path's scripts (internal/redisstore), the rate limits
// (redisstore.Limiter), and the lock library's mutex, which takes a Pipe as
// its lock.Pipeline. Ack adds a WAIT for replicas to a pipeline (RunAcked,
// ReadAcked, Replicated), for those and for the stock's load.
package redispipe

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/luascript"
)

// Pipe sends the scripts of concurrent callers to Redis together, in one
// pipeline, instead of one round trip each (auto-pipelining). Redis then
// reads and writes its socket once per batch rather than once per command,
// which is most of its CPU for short scripts, and the client saves as many
// syscalls. A batch.Loop takes whatever is pending, sends it, hands out the
// answers, and repeats; calls that arrive while a batch is in flight form
// the next one. An idle caller pays one goroutine handoff.
type Pipe struct {
	rdb     redis.UniversalClient
	cluster bool // calls of a Merged script are merged by slot
	ack     Ack
	loop    *batch.Loop[*call]
	sending atomic.Int64 // batches begun (tests wait on it)
}

type call struct {
	deadline time.Time         // zero: none
	sha      string            // the script's SHA1
	script   *redis.Script     // nil: a raw EvalSha, whose NOSCRIPT goes back to the caller
	merged   *luascript.Merged // a call of a merged script (script is its whole text)
	group    string            // its group: calls of one group are merged
	read     bool              // a read (RunRead): its answer stands whatever the replicas' WAIT says
	keys     []string
	args     []any
	cmd      *redis.Cmd
	done     chan struct{}
	// state: pending until the loop takes the call to send it (taken) or
	// its caller leaves first (withdrawn: it is dropped rather than run for
	// nobody). Exactly one of the two wins, so a caller whose ctx is
	// cancelled knows whether the call can still run.
	state atomic.Int32
}

// A call's states.
const (
	pending int32 = iota
	taken
	withdrawn
)

// maxBatch bounds one pipeline, so one huge batch cannot hold everyone's
// answers back.
const maxBatch = 128

// defaultBatchTimeout bounds a batch whose callers set no deadline.
const defaultBatchTimeout = 10 * time.Second

// closeDrain bounds how long Close keeps sending pending calls.
const closeDrain = 2 * time.Second

// ErrClosed answers the calls Close could not send in its drain time.
var ErrClosed = errors.New("redispipe: closed")

// New returns a pipe over rdb.
func New(rdb redis.UniversalClient) *Pipe { return NewAcked(rdb, Ack{}) }

// NewAcked returns a pipe whose every pipeline ends with a WAIT for
// ack's replicas: concurrent callers share one replication round trip.
// When it falls short, every call of the pipeline fails with
// ErrNotReplicated (its script did run on the primary). Only for a client
// of one primary: WAIT has no key to route by in a cluster.
func NewAcked(rdb redis.UniversalClient, ack Ack) *Pipe {
	b := &Pipe{rdb: rdb, ack: ack}
	_, b.cluster = rdb.(*redis.ClusterClient)
	b.loop = batch.New(func(ctx context.Context, calls []*call) ([]*call, error) {
		b.send(ctx, calls)
		return nil, nil // every call is answered, failures included
	}, batch.Options{Max: maxBatch, Drain: closeDrain})
	return b
}

// Run runs script like Script.Run, batched with other callers'. If ctx ends
// first it returns ctx's error and the script may still run: callers treat
// that like a lost answer.
func (b *Pipe) Run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, &call{sha: script.Hash(), script: script, keys: keys, args: args})
}

// RunRead runs script, a read, batched with other callers' scripts (Run):
// one write and one read of the socket for many callers instead of a
// round trip each, which costs a caller a fifth of the client's CPU (a
// payment's confirmation, bench-webhooks' profile, 2026-11-29). Its answer
// is not withheld when the batch's WAIT for replicas falls short: it wrote
// nothing for them to hold. A read that must not say what a failover can
// take back is ReadAcked's.
func (b *Pipe) RunRead(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, &call{sha: script.Hash(), script: script, read: true, keys: keys, args: args})
}

// RunMerged runs one call of m, batched with other callers' scripts and
// merged with the calls of m of the same group in the same pipeline: one
// EVALSHA for all of them (luascript.Merged). Calls of one group must be of
// one Redis Cluster slot; on a cluster client calls of one group are
// merged only when of one slot.
func (b *Pipe) RunMerged(ctx context.Context, m *luascript.Merged, group string, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, &call{sha: m.Hash(), script: m.Script(), merged: m, group: group, keys: keys, args: args})
}

func (b *Pipe) do(ctx context.Context, c *call) *redis.Cmd {
	c.done = make(chan struct{})
	c.deadline, _ = ctx.Deadline()
	if !b.loop.Add(c) {
		// After Close, calls go straight to Redis (a lock held when its
		// client closed must still be releasable), acknowledged as before.
		if c.read {
			return c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
		if c.merged != nil {
			k, a := luascript.PackOne(c.keys, c.args)
			cmd, err := RunAcked(ctx, b.rdb, b.ack, c.script, k, a...)
			if cmd == nil {
				return failed(err)
			}
			cmd = luascript.AnswerOne(cmd)
			if err != nil {
				return failed(err)
			}
			return cmd
		}
		cmd, err := RunAcked(ctx, b.rdb, b.ack, c.script, c.keys, c.args...)
		if err != nil {
			return failed(err)
		}
		return cmd
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
	}
	// A caller that leaves before its call is sent gets its ctx's error,
	// and the call never runs. Once sent, a cancelled caller (an HTTP client
	// that hung up) waits for the answer, up to its deadline: the script
	// may have run, and an error would leave the caller guessing — an order
	// accepted in Redis but never handed to the task relay, say, which only
	// the reconciler would find, seconds later (docs/orders.md). Past its
	// deadline a caller leaves regardless: the deadline bounds the request.
	if c.state.CompareAndSwap(pending, withdrawn) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return failed(ctx.Err())
	}
	if c.deadline.IsZero() {
		<-c.done // bounded by the batch's own timeout (defaultBatchTimeout)
		return c.cmd
	}
	t := time.NewTimer(time.Until(c.deadline))
	defer t.Stop()
	select {
	case <-c.done:
		return c.cmd
	case <-t.C:
		return failed(context.DeadlineExceeded)
	}
}

// Close sends the calls still pending (for up to closeDrain; those it cannot
// send fail with ErrClosed) and stops batching: later calls go to Redis
// directly.
func (b *Pipe) Close() {
	for _, c := range b.loop.Close() {
		c.cmd = redis.NewCmd(context.Background())
		c.cmd.SetErr(ErrClosed)
		close(c.done)
	}
}

// send runs one batch in a pipeline. Scripts Redis does not know yet
// (NOSCRIPT, after a restart or SCRIPT FLUSH) are rerun one by one with
// Script.Run, which loads them. loop ends when Close's drain time is over.
func (b *Pipe) send(loop context.Context, batch []*call) {
	b.sending.Add(1)
	// Calls whose callers already left are not sent: while Redis stalls,
	// callers time out and the pending list grows; running their scripts
	// when it recovers would only spend what the live callers need (a rate
	// limiter's tokens, say).
	now := time.Now()
	live := batch[:0:0]
	for _, c := range batch {
		if !c.state.CompareAndSwap(pending, taken) || (!c.deadline.IsZero() && !now.Before(c.deadline)) {
			c.cmd = redis.NewCmd(context.Background())
			c.cmd.SetErr(context.DeadlineExceeded)
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if batch = live; len(batch) == 0 {
		return
	}
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
	ctx, cancel := context.WithDeadline(loop, latest)
	defer cancel()

	b.pipeline(ctx, batch)
	// Scripts Redis does not know (after a restart, a failover, SCRIPT
	// FLUSH): each is loaded once, and their calls go again together, in one
	// pipeline with its own WAIT.
	var again []*call
	loaded := map[string]bool{}
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && isNoScript(err) {
			again = append(again, c)
			if !loaded[c.sha] {
				loaded[c.sha] = true
				_ = c.script.Load(ctx, b.rdb).Err() // a failure shows as the call's own error
			}
		}
	}
	if len(again) > 0 {
		b.pipeline(ctx, again)
	}
	for _, c := range batch {
		// A pipeline cut off at a deadline fails with the socket's "i/o
		// timeout", which can reach the caller before its own ctx.Done does
		// (the two fire together). Past its deadline, a caller gets the
		// error it would have had without batching.
		if err := c.cmd.Err(); err != nil && err != redis.Nil && !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			c.cmd = redis.NewCmd(context.Background())
			c.cmd.SetErr(context.DeadlineExceeded)
		}
		close(c.done)
	}
}

// pipeline sends calls' scripts in one pipeline, ending with the probe and
// WAIT when acks are on; a call whose script ran while WAIT fell short gets
// ErrNotReplicated instead of its answer.
func (b *Pipe) pipeline(ctx context.Context, calls []*call) {
	pipe := b.rdb.Pipeline()
	var groups map[string]*mergeGroup // made for the first merged call
	var merged []*mergeGroup
	for _, c := range calls {
		b.queue(ctx, pipe, c, &groups, &merged)
	}
	for _, g := range merged {
		g.send(ctx, pipe)
	}
	var wait *redis.Cmd
	if b.ack.On() {
		wait = b.ack.wait(ctx, pipe)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, g := range merged {
		g.answer()
	}
	if wait == nil {
		return
	}
	if ackErr := b.ack.check(wait); ackErr != nil {
		for _, c := range calls {
			if err := c.cmd.Err(); !c.read && (err == nil || err == redis.Nil) {
				c.cmd = failed(ackErr)
			}
		}
	}
}

// failed is a Cmd that carries err.
func failed(err error) *redis.Cmd { return luascript.Failed(err) }

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}
