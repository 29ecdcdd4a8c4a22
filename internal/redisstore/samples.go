package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Samples keeps sales' recent live figures (admin.Samples) in a sorted set
// per sale, scored by time: the reconciler adds one every pass (every 2 s)
// and trims what is older than admin.SampleWindow; the set expires an hour
// after the last sample, so a finished sale's goes by itself. A few
// hundred members a sale, two commands a pass: nothing on the order path.
type Samples struct{ rdb redis.UniversalClient }

// NewSamples returns the samples kept in rdb.
func NewSamples(rdb redis.UniversalClient) *Samples { return &Samples{rdb: rdb} }

var _ admin.Samples = (*Samples)(nil)

// Add keeps s, trimming what fell out of the window (one pipeline, one
// slot).
func (k *Samples) Add(ctx context.Context, id int64, s admin.Sample) error {
	key := rediskeys.For(id).Samples
	ms := s.At.UnixMilli()
	member := fmt.Sprintf("%d:%d:%d", ms, s.Accepted, s.Lag.Milliseconds())
	_, err := k.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(ms), Member: member})
		p.ZRemRangeByScore(ctx, key, "-inf", "("+strconv.FormatInt(ms-admin.SampleWindow.Milliseconds(), 10))
		p.PExpire(ctx, key, time.Hour)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: samples: %w", order.ErrUnavailable, err)
	}
	return nil
}

// Since returns sale id's samples from since on, oldest first.
func (k *Samples) Since(ctx context.Context, id int64, since time.Time) ([]admin.Sample, error) {
	members, err := k.rdb.ZRangeByScore(ctx, rediskeys.For(id).Samples, &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: samples: %w", order.ErrUnavailable, err)
	}
	out := make([]admin.Sample, 0, len(members))
	for _, m := range members {
		f := strings.Split(m, ":")
		if len(f) != 3 {
			continue
		}
		ms, err1 := strconv.ParseInt(f[0], 10, 64)
		acc, err2 := strconv.ParseInt(f[1], 10, 64)
		lag, err3 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, admin.Sample{At: time.UnixMilli(ms), Accepted: acc, Lag: time.Duration(lag) * time.Millisecond})
	}
	return out, nil
}
