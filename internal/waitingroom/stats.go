package waitingroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Stats are a waiting room's figures for its admin (the console's live
// page): how many joined, how far the serving counter is, how many wait,
// the rate set and the rate measured, and the wait of the last in line.
type Stats struct {
	Counters
	Joined  int64 // places given
	Waiting int64 // places given beyond the serving counter
	// Admitted is the counter's advance a second over the last
	// StatsWindow (fewer seconds just after the start), from its history:
	// what was admitted, stalls (the business cap, a pause) included.
	Admitted float64
	// EstimatedWait is the last in line's wait at the rate set; -1 when
	// unknown (paused, before the start).
	EstimatedWait time.Duration
}

// StatsWindow is how far back Stats measures the admission rate.
const StatsWindow = 10 * time.Second

// Stats returns sale's waiting room's figures: Counters (the counter
// advanced to now, as a read does), then the places given and the
// counter's history StatsWindow ago, in one pipeline.
func (s *Service) Stats(ctx context.Context, sale int64) (Stats, error) {
	c, err := s.Counters(ctx, sale)
	if err != nil {
		return Stats{}, err
	}
	k := rediskeys.For(sale)
	now := time.Now()
	ago := now.Add(-StatsWindow).Unix()
	pipe := s.rdb.Pipeline()
	mc := pipe.HMGet(ctx, k.Meta, "wr_joined", "wr_ttl_ms", "starts_ms")
	hist := pipe.HGetAll(ctx, k.QueueHist())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("%w: queue stats: %w", ErrUnavailable, err)
	}
	m := mc.Val()
	num := func(i int) int64 {
		v, _ := m[i].(string)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	st := Stats{Counters: c, Joined: num(0), EstimatedWait: -1}
	st.Waiting = max(st.Joined-c.Serving, 0)
	// The history is "sec:serving" by sec mod its size: the oldest entry
	// at or after ago is the counter then (queue.lua writes one a second
	// while it moves).
	from, base := int64(0), int64(-1)
	for _, v := range hist.Val() {
		secS, srvS, ok := strings.Cut(v, ":")
		if !ok {
			continue
		}
		sec, err1 := strconv.ParseInt(secS, 10, 64)
		srv, err2 := strconv.ParseInt(srvS, 10, 64)
		if err1 != nil || err2 != nil || sec < ago {
			continue
		}
		if base < 0 || sec < from {
			from, base = sec, srv
		}
	}
	if base >= 0 && now.Unix() > from {
		st.Admitted = float64(c.Serving-base) / float64(now.Unix()-from)
	}
	if c.Status == Waiting {
		st.EstimatedWait = WaitingPlace(st.Joined, st.Waiting, c.RateMilli).EstimatedWait // the last in line's
	}
	return st, nil
}
