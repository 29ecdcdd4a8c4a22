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

// shardHoldings is Holdings of a sale of n shards: each shard's stock,
// allotment and users in one MULTI of its slot. Units left are the sale's
// total less what each shard sold (its allotment less its stock): a
// transfer moves a shard's stock and allotment together, so this is exact
// while units move between shards, though the shards are read one by one
// (counting each shard's stock and the transfers on their way instead, a
// read between a transfer's steps counts its units twice or not at all:
// the soak's mid-run check read 5-6 units from nowhere that way,
// 2026-11-26). Whether transfers conserve units is Conserved's, on a
// quiet sale.
func shardHoldings(ctx context.Context, rdb redis.UniversalClient, id int64, n int) (int64, map[string]string, error) {
	var sold, saleTotal int64
	held := map[string]string{}
	for sh := 0; sh < n; sh++ {
		k := rediskeys.ForShard(id, sh, n)
		var stockCmd *redis.StringCmd
		var usersCmd *redis.MapStringStringCmd
		var metaCmd *redis.SliceCmd
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			stockCmd, usersCmd, metaCmd = p.Get(ctx, k.Stock), p.HGetAll(ctx, k.Users), p.HMGet(ctx, k.Meta, "total", "sale_total")
			return nil
		}); err != nil {
			return 0, nil, fmt.Errorf("invariants: shard %d's stock and users: %w", sh, err)
		}
		l, err := stockCmd.Int64()
		if err != nil {
			return 0, nil, fmt.Errorf("invariants: shard %d's stock: %w", sh, err)
		}
		m := metaCmd.Val()
		allot, _ := strconv.ParseInt(fmt.Sprint(m[0]), 10, 64)
		sold += allot - l
		if sh == 0 {
			saleTotal, _ = strconv.ParseInt(fmt.Sprint(m[1]), 10, 64)
		}
		for user, units := range usersCmd.Val() {
			a, _ := strconv.ParseInt(held[user], 10, 64)
			b, _ := strconv.ParseInt(units, 10, 64)
			held[user] = strconv.FormatInt(a+b, 10)
		}
	}
	if saleTotal <= 0 {
		return 0, nil, fmt.Errorf("invariants: sale %d in %d shards has no sale_total in its meta", id, n)
	}
	return saleTotal - sold, held, nil
}

// Conserved sums what a quiet sharded sale's shards hold — their
// allotments (what each sold and holds) and the units on their way
// between them, taken and not given — against its total: transfers move
// units, never make or lose them. For a sale of one shard it is its
// meta's total. Read it on a quiet sale: the shards are read one by one.
func Conserved(ctx context.Context, rdb redis.UniversalClient, id int64) (held, total int64, err error) {
	n, err := shardsOf(ctx, rdb, id)
	if err != nil {
		return 0, 0, err
	}
	for sh := 0; sh < n; sh++ {
		k := rediskeys.ForShard(id, sh, n)
		m, err := rdb.HMGet(ctx, k.Meta, "total", "sale_total").Result()
		if err != nil {
			return 0, 0, fmt.Errorf("invariants: meta: %w", err)
		}
		allot, _ := strconv.ParseInt(fmt.Sprint(m[0]), 10, 64)
		held += allot
		if sh == 0 {
			total = allot
			if n > 1 {
				total, _ = strconv.ParseInt(fmt.Sprint(m[1]), 10, 64)
			}
		}
		if n == 1 {
			continue
		}
		recs, err := rdb.HGetAll(ctx, k.Transit).Result()
		if err != nil {
			return 0, 0, fmt.Errorf("invariants: transit: %w", err)
		}
		for tid, rec := range recs {
			f := strings.Split(rec, ":")
			if len(f) != 3 {
				continue
			}
			to, _ := strconv.Atoi(f[0])
			given, err := rdb.SIsMember(ctx, rediskeys.ForShard(id, to, n).Applied, tid).Result()
			if err != nil {
				return 0, 0, fmt.Errorf("invariants: transfer %s: %w", tid, err)
			}
			if !given {
				u, _ := strconv.ParseInt(f[1], 10, 64)
				held += u
			}
		}
	}
	return held, total, nil
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
