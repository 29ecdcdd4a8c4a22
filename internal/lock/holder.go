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
	// handoffs (0 if the counter's lifetime ran out during the hold, or the
	// lock was obtained WithoutFence and no holder of the key minted one).
	Fence      int64
	Host       string
	PID        int
	Label      string
	AcquiredAt time.Time     // the holder's clock
	TTL        time.Duration // remaining; -1 when the key has no expiry
	// Count is the reentrant owner's number of holds (1 for other kinds).
	Count int
	// Waiting is the fair lock's queue length, crashed waiters not yet
	// skipped included (0 for other kinds).
	Waiting int
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

// HolderIn describes who holds the mutex key kept in table (InTable), or
// returns ErrNotHeld. Fence is the table's counter: the highest fence any
// lock of the table was given.
func (c *Client) HolderIn(ctx context.Context, table, key string) (Holder, error) {
	if c == nil || c.rdb == nil {
		return Holder{}, invalidf("nil redis client")
	}
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	if err := validateKey(table); err != nil {
		return Holder{}, invalidf("table: %v", err)
	}
	if err := validateTableKey(key); err != nil {
		return Holder{}, err
	}
	k := newTableKeys(c.cfg.Prefix, table, key)
	var val, fence *redis.StringCmd
	var now *redis.TimeCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		val = p.HGet(ctx, k.lock, k.field)
		fence = p.Get(ctx, k.fence)
		now = p.Time(ctx)
		return nil
	})
	if err != nil && err != redis.Nil {
		return Holder{}, unavailable("inspect", err)
	}
	expires, value, ok := strings.Cut(val.Val(), "|")
	ms, _ := strconv.ParseInt(expires, 10, 64)
	left := time.UnixMilli(ms).Sub(now.Val())
	if val.Err() == redis.Nil || !ok || left <= 0 {
		return Holder{}, ErrNotHeld
	}
	h := parseHolder(value, left.Truncate(time.Millisecond))
	h.Fence, _ = fence.Int64()
	return h, nil
}

// parseHolder reads a mutex value: the token, then the metadata.
func parseHolder(v string, ttl time.Duration) Holder {
	token, meta, _ := strings.Cut(v, metaSep)
	h := Holder{Owner: token[:min(8, len(token))], TTL: ttl, Count: 1}
	h.setMeta(meta)
	return h
}

// setMeta reads "pid at host label" (metaSep between); the label is last so
// it may contain anything.
func (h *Holder) setMeta(meta string) {
	f := strings.SplitN(meta, metaSep, 4)
	for len(f) < 4 {
		f = append(f, "")
	}
	h.PID, _ = strconv.Atoi(f[0])
	if ms, err := strconv.ParseInt(f[1], 10, 64); err == nil {
		h.AcquiredAt = time.UnixMilli(ms)
	}
	h.Host, h.Label = f[2], f[3]
}
