package redispipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Ack is how many replicas must hold a write before it is reported, and
// how long to wait for them: Redis's WAIT. Zero Replicas waits for none.
type Ack struct {
	Replicas int
	Timeout  time.Duration
	// Probe is the key written just before each WAIT. Default
	// rediskeys.AckProbe ("fs:ack-probe").
	Probe string
}

// ErrNotReplicated: fewer replicas than Ack.Replicas confirmed the writes in
// time. The writes are on the primary and may or may not survive a
// failover; the caller must not report them as done.
var ErrNotReplicated = errors.New("redis: not acknowledged by enough replicas in time")

// On reports whether acks are asked for.
func (a Ack) On() bool { return a.Replicas > 0 }

// wait queues a probe write and then WAIT on p. WAIT waits for the
// connection's last write, and a pipeline runs on one connection: with the
// probe written last, WAIT covers everything the pipeline did and, since a
// replica applies the primary's writes in order, everything the primary
// had done before — whatever the scripts themselves wrote. Without the
// probe an answer whose script wrote nothing (a refusal, a pay found
// already paid, a replayed order) would be vouched for by an older write
// of the connection (on Redis 7.2+, where reads no longer move that mark)
// or by a read (before 7.2): neither says the state it reported is on the
// replicas.
func (a Ack) wait(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	probe := a.Probe
	if probe == "" {
		probe = rediskeys.AckProbe
	}
	p.Set(ctx, probe, 1, time.Minute)
	return p.Do(ctx, "WAIT", a.Replicas, max(a.Timeout.Milliseconds(), 1))
}

// check turns WAIT's answer into an error: nil once enough replicas confirmed.
func (a Ack) check(cmd *redis.Cmd) error {
	n, err := cmd.Int64()
	if err != nil {
		acks.WithLabelValues("failed").Inc()
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if int(n) < a.Replicas {
		acks.WithLabelValues("short").Inc()
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, a.Replicas, a.Timeout)
	}
	acks.WithLabelValues("confirmed").Inc()
	return nil
}

// acks counts the process's WAITs by outcome. One counter for the process
// (every Pipe and RunAcked shares it), registered by the program
// (Collectors).
var acks = func() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_redis_acks_total",
		Help: "WAITs for the replicas (REDIS_ACK_REPLICAS) by result: confirmed; short (fewer replicas than asked confirmed in REDIS_ACK_TIMEOUT: the change was answered 503); failed (WAIT itself failed: the connection, a failover).",
	}, []string{"result"})
	for _, r := range []string{"confirmed", "short", "failed"} {
		c.WithLabelValues(r) // every result exported from the start, at 0: a rate over it is defined
	}
	return c
}()

// Collectors are the package's metrics, for a program's registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{acks} }

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
		return nil, fmt.Errorf("redispipe: acks need a client that pipelines, not %T", rdb)
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
// they hold everything the primary had written before it. Careful: that is
// everything the server this call reached had written — a read made
// earlier, on another connection, may have reached another primary before a
// failover. To vouch for reads, make them in the same pipeline (ReadAcked).
// key is the probe's.
func Replicated(ctx context.Context, rdb redis.UniversalClient, a Ack, key string) error {
	if !a.On() {
		return nil
	}
	var wait *redis.Cmd
	a.Probe = key
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		wait = a.wait(ctx, p)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	return a.check(wait)
}

// ReadAcked runs read's commands, then a probe write and WAIT, in one
// pipeline on one connection: what read returns was on a's replicas when
// the call returned nil, or it fails with ErrNotReplicated. (If the
// connection breaks, go-redis sends the whole pipeline again, reads
// included, so reads and WAIT are always of the same server.) With no
// replicas asked for it is a plain pipeline.
func ReadAcked(ctx context.Context, rdb redis.UniversalClient, a Ack, read func(p redis.Pipeliner)) error {
	var wait *redis.Cmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		read(p)
		if a.On() {
			wait = a.wait(ctx, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if wait == nil {
		return nil
	}
	return a.check(wait)
}
