package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ack is how many replicas must hold a write before it is reported, and
// how long to wait for them: Redis's WAIT. Zero Replicas waits for none.
type Ack struct {
	Replicas int
	Timeout  time.Duration
}

// ErrNotReplicated: fewer replicas than Ack.Replicas confirmed the writes in
// time. The writes are on the primary and may or may not survive a
// failover; the caller must not report them as done.
var ErrNotReplicated = errors.New("redis: not acknowledged by enough replicas in time")

// On reports whether acks are asked for.
func (a Ack) On() bool { return a.Replicas > 0 }

// wait queues WAIT on p, after the writes it covers. WAIT is a property of
// the connection, and a pipeline runs on one: it covers every write before
// it in the pipeline and, since a replica applies the primary's writes in
// order, every write the primary made before those too.
func (a Ack) wait(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	return p.Do(ctx, "WAIT", a.Replicas, a.Timeout.Milliseconds())
}

// check turns WAIT's answer into an error: nil once enough replicas confirmed.
func (a Ack) check(cmd *redis.Cmd) error {
	n, err := cmd.Int64()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if int(n) < a.Replicas {
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, a.Replicas, a.Timeout)
	}
	return nil
}

// RunAcked runs script and then waits for a's replicas, in one pipeline on
// one connection: a single write and read, and WAIT covers the script's
// writes. A script Redis does not know is loaded and the pipeline sent
// again. With no replicas asked for it is script.Run. The script's answer
// comes back whatever WAIT says; ErrNotReplicated (in the returned error,
// not the Cmd) says it must not be reported.
func RunAcked(ctx context.Context, rdb redis.Scripter, a Ack, script *redis.Script, keys []string, args ...any) (*redis.Cmd, error) {
	if !a.On() {
		cmd := script.Run(ctx, rdb, keys, args...)
		return cmd, nil
	}
	p, ok := rdb.(interface{ Pipeline() redis.Pipeliner })
	if !ok {
		return nil, fmt.Errorf("redisbatch: acks need a client that pipelines, not %T", rdb)
	}
	for attempt := 0; ; attempt++ {
		pipe := p.Pipeline()
		cmd := script.EvalSha(ctx, pipe, keys, args...)
		wait := a.wait(ctx, pipe)
		_, _ = pipe.Exec(ctx)
		if err := cmd.Err(); err != nil && isNoScript(err) && attempt == 0 {
			if err := script.Load(ctx, rdb).Err(); err != nil {
				return cmd, err
			}
			continue
		}
		if cmd.Err() != nil && cmd.Err() != redis.Nil {
			return cmd, nil // the script failed: nothing to acknowledge
		}
		return cmd, a.check(wait)
	}
}

// Replicated writes a probe and waits for a's replicas to hold it. Since a
// replica applies the primary's writes in order, once they hold the probe
// they hold everything the primary had written before it: whatever the
// caller read from the primary before calling is safe from a failover. key
// is the probe's (any key on the primary the data lives on).
func Replicated(ctx context.Context, rdb redis.UniversalClient, a Ack, key string) error {
	if !a.On() {
		return nil
	}
	var wait *redis.Cmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, 1, time.Minute)
		wait = a.wait(ctx, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	return a.check(wait)
}
