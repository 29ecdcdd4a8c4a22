package lock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holder describes who holds a lock, for diagnosis (logs, the admin API).
type Holder struct {
	// Owner is the first 8 hex characters of the holder's token: enough to
	// tell holders apart, not enough to release someone else's lock.
	Owner string
	// Fence is the highest fence minted for the key: the holder's, or a
	// little above it when its process reserved a block of fences for local
	// handoffs (and 0 if the counter's lifetime ran out during the hold).
	Fence      int64
	Host       string
	PID        int
	Label      string
	AcquiredAt time.Time     // the holder's clock
	TTL        time.Duration // remaining; -1 when the key has no expiry
}

// Holder reports who holds the mutex key, or ErrNotHeld when nobody does.
func (c *Client) Holder(ctx context.Context, key string) (Holder, error) {
	if c == nil || c.rdb == nil {
		return Holder{}, invalidf("nil redis client")
	}
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	k := newMutexKeys(c.cfg.Prefix, key)
	var val, fence *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		val = p.Get(ctx, k.lock)
		fence = p.Get(ctx, k.fence)
		pttl = p.PTTL(ctx, k.lock)
		return nil
	})
	if err != nil && err != redis.Nil {
		return Holder{}, unavailable("inspect", err)
	}
	if val.Err() == redis.Nil {
		return Holder{}, ErrNotHeld
	}
	h := parseHolder(val.Val(), pttl.Val())
	h.Fence, _ = fence.Int64()
	return h, nil
}

// parseHolder reads "token pid at host label" (metaSep between); the label
// is last so it may contain anything.
func parseHolder(v string, ttl time.Duration) Holder {
	f := strings.SplitN(v, metaSep, 5)
	for len(f) < 5 {
		f = append(f, "")
	}
	h := Holder{Host: f[3], Label: f[4], TTL: ttl}
	if len(f[0]) >= 8 {
		h.Owner = f[0][:8]
	}
	h.PID, _ = strconv.Atoi(f[1])
	if ms, err := strconv.ParseInt(f[2], 10, 64); err == nil {
		h.AcquiredAt = time.UnixMilli(ms)
	}
	return h
}
