package redisbatch

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Client is a go-redis client whose EvalSha goes through a Batcher, for a
// library that runs its Lua with redis.Script (go-redis/redis_rate): every
// request's script then shares a pipeline with the others' in flight,
// instead of costing its own write and read on both ends. Everything else,
// EVAL included (redis.Script's fallback after NOSCRIPT), goes to the
// client as is.
//
// Why: in a CPU profile of the order path with the per-user rate limit on
// (the default), redis_rate's own round trip per request was 18% of the
// API's CPU, most of it the write syscall. Throughput on a saturated 2-core
// machine moved within run-to-run noise (+3% mean over six interleaved runs,
// docs/benchmarks.md): the CPU saved goes to the other processes.
type Client struct {
	redis.UniversalClient
	batch *Batcher
}

// NewClient returns rdb with EvalSha batched by b.
func NewClient(rdb redis.UniversalClient, b *Batcher) *Client {
	return &Client{UniversalClient: rdb, batch: b}
}

// EvalSha runs the script with SHA1 sha in the batcher's next pipeline.
func (c *Client) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return c.batch.EvalSha(ctx, sha, keys, args...)
}
