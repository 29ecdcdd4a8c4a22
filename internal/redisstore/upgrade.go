package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Upgraded says what Upgrade moved.
type Upgraded struct {
	Sales, Orders, Outboxes, Keys int
}

// Upgrade moves what versions before 2026-11-24 kept in Redis into today's
// form, sale by sale: each order's own hash (fs:{act:<id>}:o:<no>) becomes a
// field of the sale's orders hash, the outbox stream a sorted set, each
// Idempotency-Key's string a field of the sale's idem hash; and a sale
// loaded before load.lua set expire_at_ms gets one (activity.LiveUntil with
// the default retention), so that every key of it expires. It is
// idempotent: run again, it finds nothing to move.
//
// Run it with no api or worker of an older version running (`api
// upgrade-redis`; docs/upgrading.md): an older process still writing
// would write the old form behind it.
func Upgrade(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (Upgraded, error) {
	var out Upgraded
	var mu sync.Mutex
	err := eachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		ids, err := scanSales(ctx, c)
		if err != nil {
			return err
		}
		for _, id := range ids {
			u, err := upgradeSale(ctx, c, rediskeys.For(id))
			if err != nil {
				return fmt.Errorf("sale %d: %w", id, err)
			}
			if u != (Upgraded{}) {
				log.Info("redis: sale upgraded", "activity", id, "orders", u.Orders, "outbox", u.Outboxes, "keys", u.Keys)
				mu.Lock()
				out.Sales++
				out.Orders += u.Orders
				out.Outboxes += u.Outboxes
				out.Keys += u.Keys
				mu.Unlock()
			}
		}
		return nil
	})
	return out, err
}

// eachMaster runs f on rdb, or on every master of a cluster (a sale's keys
// share its slot, so one master holds them all).
func eachMaster(ctx context.Context, rdb redis.UniversalClient, f func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.Client:
		return f(ctx, c)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, f)
	}
	return fmt.Errorf("redisstore: upgrade: unsupported client %T", rdb)
}

// scanSales lists the activities that have a meta hash.
func scanSales(ctx context.Context, c *redis.Client) ([]int64, error) {
	var ids []int64
	iter := c.Scan(ctx, 0, rediskeys.MetaPattern, 1000).Iterator()
	for iter.Next(ctx) {
		if id, ok := rediskeys.ActivityOfMeta(iter.Val()); ok {
			ids = append(ids, id)
		}
	}
	return ids, iter.Err()
}

// scanKeys lists the keys that start with prefix.
func scanKeys(ctx context.Context, c *redis.Client, prefix string) ([]string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

func upgradeSale(ctx context.Context, c *redis.Client, k rediskeys.Activity) (Upgraded, error) {
	var u Upgraded
	expireAt, err := saleExpiry(ctx, c, k)
	if err != nil || expireAt == 0 {
		return u, err // no meta any more: its keys expire as they were
	}
	if typ, err := c.Type(ctx, k.Outbox).Result(); err != nil {
		return u, err
	} else if typ == "stream" {
		entries, err := c.XRange(ctx, k.Outbox, "-", "+").Result()
		if err != nil {
			return u, err
		}
		zs := make([]redis.Z, 0, len(entries))
		for _, e := range entries {
			no, _ := e.Values["o"].(string)
			ms, _ := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
			if no != "" {
				zs = append(zs, redis.Z{Score: float64(ms), Member: no})
			}
		}
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, k.Outbox)
			if len(zs) > 0 {
				p.ZAdd(ctx, k.Outbox, zs...)
			}
			return nil
		}); err != nil {
			return u, err
		}
		u.Outboxes++
	}
	legacy := strings.TrimSuffix(k.LegacyOrder("x"), "x")
	keys, err := scanKeys(ctx, c, legacy)
	if err != nil {
		return u, err
	}
	for _, key := range keys {
		m, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			return u, err
		}
		no := strings.TrimPrefix(key, legacy)
		if len(m) > 0 {
			if m["persisted"] == "0" {
				m["persisted"] = ""
			}
			if m["fence"] == "0" {
				m["fence"] = ""
			}
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSetNX(ctx, k.Orders, no, formatRecord(m))
				p.Del(ctx, key)
				return nil
			}); err != nil {
				return u, err
			}
			u.Orders++
		}
	}
	idemPrefix := k.LegacyIdempotencyPrefix()
	keys, err = scanKeys(ctx, c, idemPrefix)
	if err != nil {
		return u, err
	}
	for _, key := range keys {
		no, err := c.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return u, err
		}
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSetNX(ctx, k.Idem, strings.TrimPrefix(key, idemPrefix), no)
			p.Del(ctx, key)
			return nil
		}); err != nil {
			return u, err
		}
		u.Keys++
	}
	// Every key of the sale expires with it, none before it: a key with no
	// expiry, or one earlier than the sale's, takes the sale's. (Before
	// 2026-11-28 a reload that extended a sale left its payments hash at
	// the first expiry: such a sale's payment records would expire before
	// its orders.)
	for _, key := range []string{k.Meta, k.Stock, k.Users, k.Orders, k.Outbox, k.Idem, k.Forming(), k.Unsettled(),
		k.Payments, k.Transit, k.Taken, k.Applied} {
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			return u, err
		}
		// go-redis answers -1 (no expiry) and -2 (no key) as those many
		// nanoseconds, a ttl in milliseconds.
		early := ttl > 0 && time.Now().Add(ttl).UnixMilli() < expireAt-1000
		if ttl == -1 || early {
			if err := c.PExpireAt(ctx, key, time.UnixMilli(expireAt)).Err(); err != nil {
				return u, err
			}
		}
	}
	return u, nil
}

// saleExpiry is when k's sale's keys expire (meta's expire_at_ms); a sale
// loaded before there was one gets it here: retention after the last
// moment its orders can change (activity.LiveUntil). 0 when the meta is
// gone.
func saleExpiry(ctx context.Context, c *redis.Client, k rediskeys.Activity) (int64, error) {
	m, err := c.HMGet(ctx, k.Meta, "expire_at_ms", "ends_ms", "group_ttl_ms", "pay_ttl_ms").Result()
	if err != nil {
		return 0, err
	}
	num := func(v any) int64 { s, _ := v.(string); n, _ := strconv.ParseInt(s, 10, 64); return n }
	if at := num(m[0]); at > 0 {
		return at, nil
	}
	if m[1] == nil {
		return 0, nil
	}
	at := num(m[1]) + num(m[2]) + num(m[3]) + activity.DefaultRetention.Milliseconds()
	return at, c.HSet(ctx, k.Meta, "expire_at_ms", at).Err()
}
