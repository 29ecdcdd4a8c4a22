package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// The rate limits are one Lua function, rate_limit of lib_rate.lua (GCRA,
// go-redis/redis_rate's algorithm, kept in a hash per time window): an
// order's script charges it (place.lua), the /v1 middleware and the group
// requests through Limiter (rate_limit.lua), so a user's orders and other
// requests spend one budget and an order pays no round trip for it. On
// Redis Cluster an order's script charges a budget of the user's in its
// sale, kept in the sale's shard's slot (rediskeys.Activity.RateLimit):
// the one budget is in another slot, which a script cannot reach.

// clusterRateShards is how many base keys a scope's clients are spread over
// on Redis Cluster (rediskeys.RateLimit). One elsewhere: there every call
// of a batch shares one window's HMGET and HSET, and more bases would mean
// more of them.
const clusterRateShards = 16

// RateShards is how many base keys the rate limits on rdb spread a scope
// over (Limiter's; an order's script charges the one base off a cluster,
// and its sale's on one: Orders.place).
func RateShards(rdb redis.UniversalClient) int {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return clusterRateShards
	}
	return 1
}

// Limiter limits how many requests a client makes a second: a burst of the
// rate, then the rate (redis_rate.PerSecond's limit). Concurrent requests'
// checks are merged into one script run by the pipe.
type Limiter struct {
	pipe   *redispipe.Pipe
	shards int
}

var _ order.RateLimiter = (*Limiter)(nil)

// NewLimiter returns a limiter on rdb whose scripts go through p (a pipe
// of rdb).
func NewLimiter(rdb redis.UniversalClient, p *redispipe.Pipe) *Limiter {
	return &Limiter{pipe: p, shards: RateShards(rdb)}
}

// Allow charges one request of who in scope against perSecond. Over the
// limit it charges nothing and says when the next request would be
// allowed.
func (l *Limiter) Allow(ctx context.Context, scope, who string, perSecond int) (allowed bool, retryAfter time.Duration, err error) {
	return allow(ctx, l.pipe, l.shards, scope, who, perSecond)
}

// allow runs one call of rate_limit.lua through p: as redis_rate.PerSecond
// limits, burst perSecond, rate perSecond per 1 s, cost 1.
func allow(ctx context.Context, p *redispipe.Pipe, shards int, scope, who string, perSecond int) (bool, time.Duration, error) {
	reply, err := p.RunMerged(ctx, rateLimitMerged, "", []string{rediskeys.RateLimit(scope, who, shards)},
		strconv.Itoa(perSecond), who).Result()
	if err == redis.Nil {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, retryAfterOf(reply), nil
}

// retryAfterOf reads rate_limit.lua's refusal, {retry after, in seconds};
// a second if it cannot be read.
func retryAfterOf(reply any) time.Duration {
	if r, ok := reply.([]any); ok && len(r) == 1 {
		if s, ok := r[0].(string); ok {
			return parseRetryAfter(s)
		}
	}
	return time.Second
}
