package invariants

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// shardsOf is how many shards sale id has in Redis: what its shard 0's
// meta says, 1 when it says nothing (a sale of one shard, or loaded before
// shards existed).
func shardsOf(ctx context.Context, rdb redis.UniversalClient, id int64) (int, error) {
	v, err := rdb.HGet(ctx, rediskeys.For(id).Meta, "shards").Result()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("invariants: shards: %w", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("invariants: shards %q in the meta", v)
	}
	return n, nil
}

// shardHoldings is Holdings of a sale of n shards: each shard's stock and
// users in one MULTI of its slot, summed, with the units on their way
// between shards counted as left (a transfer's record in its donor; they
// are the sale's, sold from the receiver once given) — but for a record
// whose units its receiver was already given (its mover lost Redis before
// deleting it): they are in the receiver's stock, and counted twice they
// would read as units from nowhere (the soak's mid-run check found one,
// 2026-11-26, under a latency fault).
func shardHoldings(ctx context.Context, rdb redis.UniversalClient, id int64, n int) (int64, map[string]string, error) {
	var left int64
	held := map[string]string{}
	for sh := 0; sh < n; sh++ {
		k := rediskeys.ForShard(id, sh, n)
		var stockCmd *redis.StringCmd
		var usersCmd *redis.MapStringStringCmd
		var transitCmd *redis.MapStringStringCmd
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			stockCmd, usersCmd, transitCmd = p.Get(ctx, k.Stock), p.HGetAll(ctx, k.Users), p.HGetAll(ctx, k.Transit)
			return nil
		}); err != nil {
			return 0, nil, fmt.Errorf("invariants: shard %d's stock and users: %w", sh, err)
		}
		l, err := stockCmd.Int64()
		if err != nil {
			return 0, nil, fmt.Errorf("invariants: shard %d's stock: %w", sh, err)
		}
		left += l
		for tid, rec := range transitCmd.Val() {
			f := strings.Split(rec, ":")
			if len(f) != 3 {
				continue
			}
			to, _ := strconv.Atoi(f[0])
			given, err := rdb.SIsMember(ctx, rediskeys.ForShard(id, to, n).Applied, tid).Result()
			if err != nil {
				return 0, nil, fmt.Errorf("invariants: shard %d's transfer %s: %w", sh, tid, err)
			}
			if !given {
				u, _ := strconv.ParseInt(f[1], 10, 64)
				left += u
			}
		}
		for user, units := range usersCmd.Val() {
			a, _ := strconv.ParseInt(held[user], 10, 64)
			b, _ := strconv.ParseInt(units, 10, 64)
			held[user] = strconv.FormatInt(a+b, 10)
		}
	}
	return left, held, nil
}

// shardMeta sums fields of every shard's meta of sale id (a sale of one
// shard: its meta's).
func shardMeta(ctx context.Context, rdb redis.UniversalClient, id int64, fields ...string) ([]int64, error) {
	n, err := shardsOf(ctx, rdb, id)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(fields))
	for sh := 0; sh < n; sh++ {
		v, err := rdb.HMGet(ctx, rediskeys.ForShard(id, sh, n).Meta, fields...).Result()
		if err != nil {
			return nil, fmt.Errorf("invariants: meta: %w", err)
		}
		for i := range fields {
			x, _ := strconv.ParseInt(fmt.Sprint(v[i]), 10, 64)
			out[i] += x
		}
	}
	return out, nil
}
