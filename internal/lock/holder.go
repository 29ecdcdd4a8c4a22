package lock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holder describes who holds a lock, for diagnosis (logs, the admin API).
type Holder struct {
	// Owner is the first 8 hex characters of the holder's token: enough to
	// tell holders apart, not enough to release someone else's lock.
	Owner      string
	Fence      int64
	Host       string
	PID        int
	Label      string
	AcquiredAt time.Time     // Redis server time
	TTL        time.Duration // remaining; -1 when the key has no expiry
}

// Holder reports who holds the mutex key, or an error wrapping ErrNotHeld
// when nobody does.
func (c *Client) Holder(ctx context.Context, key string) (Holder, error) {
	if c == nil || c.rdb == nil {
		return Holder{}, invalidf("nil redis client")
	}
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	k := newMutexKeys(c.cfg.Prefix, key).lock
	var fields *redis.MapStringStringCmd
	var pttl *redis.DurationCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, k)
		pttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil {
		return Holder{}, unavailable("inspect", err)
	}
	m := fields.Val()
	if len(m) == 0 {
		return Holder{}, ErrNotHeld
	}
	h := Holder{Host: m["host"], Label: m["label"], TTL: pttl.Val()}
	if tok := m["token"]; len(tok) >= 8 {
		h.Owner = tok[:8]
	}
	h.Fence, _ = strconv.ParseInt(m["fence"], 10, 64)
	h.PID, _ = strconv.Atoi(m["pid"])
	if ms, err := strconv.ParseInt(m["at"], 10, 64); err == nil {
		h.AcquiredAt = time.UnixMilli(ms)
	}
	return h, nil
}
