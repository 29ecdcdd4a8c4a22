package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// The rate limits are one script, rate_limit.lua (GCRA, go-redis/redis_rate's
// algorithm, kept in a hash per time window): the /v1 middleware runs it
// through a batcher (Limiter), and the per-user order lock runs it as its
// obtain's guard (Locks), so a user's orders and other requests spend one
// budget and the order pays no round trip for it.
var (
	rateLimitMerged = luascript.NewMerged(mustSource("rate_limit"))
	rateLimitGuard  = lock.NewBatchGuard(mustSource("rate_limit"))
)

// clusterRateShards is how many base keys a scope's clients are spread over
// on Redis Cluster (rediskeys.RateLimit). One elsewhere: there every call
// of a batch shares one window's HMGET and HSET, and more bases would mean
// more of them.
const clusterRateShards = 16

// RateShards is how many base keys the rate limits on rdb spread a scope
// over: Limiter and Locks must agree on it, or a user would have two
// budgets.
func RateShards(rdb redis.UniversalClient) int {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return clusterRateShards
	}
	return 1
}

// Limiter limits how many requests a client makes a second: a burst of the
// rate, then the rate (redis_rate.PerSecond's limit). Concurrent requests'
// checks are merged into one script run by the batcher.
type Limiter struct {
	batch  *redispipe.Pipe
	shards int
}

// NewLimiter returns a limiter on rdb whose scripts go through b (a batcher
// of rdb).
func NewLimiter(rdb redis.UniversalClient, b *redispipe.Pipe) *Limiter {
	return &Limiter{batch: b, shards: RateShards(rdb)}
}

// Allow charges one request of who in scope against perSecond. Over the
// limit it charges nothing and says when the next request would be
// allowed.
func (l *Limiter) Allow(ctx context.Context, scope, who string, perSecond int) (allowed bool, retryAfter time.Duration, err error) {
	keys, args := rateLimitCall(scope, who, l.shards, perSecond)
	reply, err := l.batch.RunMerged(ctx, rateLimitMerged, "", keys, args...).Result()
	if err == redis.Nil {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return false, retryAfterOf(reply), nil
}

// rateLimitCall is one call of rate_limit.lua charging a request of who
// in scope against perSecond, as redis_rate.PerSecond limits: burst
// perSecond, rate perSecond per 1 s, cost 1 (the script's only limit).
// Limiter.Allow and the order lock's guard (Locks.Obtain) both make it, so
// a user's budget is one.
func rateLimitCall(scope, who string, shards, perSecond int) ([]string, []any) {
	return []string{rediskeys.RateLimit(scope, who, shards)}, []any{who, perSecond}
}

// retryAfterOf reads rate_limit.lua's refusal, {retry after, in seconds};
// a second if it cannot be read.
func retryAfterOf(reply any) time.Duration {
	if r, ok := reply.([]any); ok && len(r) == 1 {
		if s, ok := r[0].(string); ok {
			if secs, err := strconv.ParseFloat(s, 64); err == nil {
				return time.Duration(secs * float64(time.Second))
			}
		}
	}
	return time.Second
}
