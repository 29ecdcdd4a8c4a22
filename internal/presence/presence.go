// Package presence keeps who is online: shoppers' apps (a user) and devices
// (an id) send a heartbeat — "I am here", optionally "watching activity N"
// — and are online until PRESENCE_TTL passes without one (the seed
// articles' device heartbeat). A crowd waiting for a sale to start is
// exactly when this is busy, so a heartbeat costs little: heartbeats of
// concurrent requests are gathered (internal/batch) and written as one ZADD
// per sorted set per batch, in one pipeline, and each batch trims what
// expired from the sets it touched.
//
// Redis: a sorted set of every client online (member "u:<user id>" or
// "d:<device id>", score the last heartbeat in unix ms), and one per
// activity of the clients watching it (hash-tagged with the activity, in
// its Redis Cluster slot). Members past the ttl are removed, so memory is
// bounded by the clients online: about 110 bytes a client in each set,
// 110 MB a million (measured: docs/benchmarks.md, "Presence"). Only an
// activity on show may be watched (Activities: published and not yet
// ended), so the sets are as many as the sales an admin put on, never one
// for each id a caller makes up. How many devices one network can put
// online is the HTTP layer's rate limit times the ttl (internal/httpapi).
package presence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/batch"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Errors. A heartbeat naming an activity that may not be watched is
// refused with activity.ErrNotFound (unknown, or a draft) or
// activity.ErrEnded (closed, or past its end).
var (
	// ErrInvalid: a heartbeat without a user or a valid device id, or an
	// activity id that is not positive.
	ErrInvalid = errors.New("presence: invalid")
	// ErrUnavailable wraps a failure to reach Redis.
	ErrUnavailable = errors.New("presence: unavailable")
)

// Activities reads what shoppers may see of an activity, without Redis
// (catalog.Catalog): activity.ErrNotFound for an unknown id or a draft.
type Activities interface {
	Activity(ctx context.Context, id int64) (activity.Activity, error)
}

// Client is who sends heartbeats: a signed-in user, or a device.
type Client struct {
	UserID int64  // > 0 for a user
	Device string // otherwise a device id: 1-64 letters, digits, '-', '_', '.', ':'
}

func (c Client) member() (string, error) {
	if c.UserID > 0 {
		return "u:" + strconv.FormatInt(c.UserID, 10), nil
	}
	if !validDevice(c.Device) {
		return "", refusal.OfField(ErrInvalid, "device_id", "a heartbeat needs a bearer token or a device_id of 1-64 letters, digits, '-', '_', '.' or ':'")
	}
	return "d:" + c.Device, nil
}

func validDevice(d string) bool {
	if d == "" || len(d) > 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}

// Config tunes a Tracker. The zero value gives the defaults in the comments.
type Config struct {
	// TTL is how long a client is online after its last heartbeat. Default 300s.
	TTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Tracker records heartbeats and answers who is online.
type Tracker struct {
	rdb  redis.UniversalClient
	acts Activities
	cfg  Config
	loop *batch.Loop[*beat]
}

type beat struct {
	member   string
	activity int64
	at       int64 // unix ms
	err      error
	done     chan struct{}
}

// New returns a Tracker on rdb whose heartbeats may watch the activities
// acts knows to be on show (nil: none). Close it to write what is pending.
func New(rdb redis.UniversalClient, acts Activities, cfg Config) *Tracker {
	if cfg.TTL <= 0 {
		cfg.TTL = 300 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tracker{rdb: rdb, acts: acts, cfg: cfg}
	t.loop = batch.New(func(ctx context.Context, b []*beat) ([]*beat, error) {
		err := t.write(ctx, b)
		for _, h := range b {
			h.err = err
			close(h.done)
		}
		return nil, nil // a heartbeat is not retried: the next one comes soon
	}, batch.Options{Max: 5000})
	return t
}

// TTL is how long a client stays online after a heartbeat.
func (t *Tracker) TTL() time.Duration { return t.cfg.TTL }

// Close writes the heartbeats still pending and stops batching.
func (t *Tracker) Close() {
	for _, h := range t.loop.Close() {
		h.err = fmt.Errorf("%w: closed", ErrUnavailable)
		close(h.done)
	}
}

// Heartbeat records that c is here, watching activityID (0: none). It
// returns once the batch it joined is written. A heartbeat refused
// (ErrInvalid, activity.ErrNotFound, activity.ErrEnded) writes nothing.
func (t *Tracker) Heartbeat(ctx context.Context, c Client, activityID int64) error {
	m, err := c.member()
	if err != nil {
		return err
	}
	if activityID < 0 {
		return refusal.OfField(ErrInvalid, "activity_id", "activity_id %d is not positive", activityID)
	}
	if activityID > 0 {
		if err := t.watchable(ctx, activityID); err != nil {
			return err
		}
	}
	h := &beat{member: m, activity: activityID, at: t.cfg.Now().UnixMilli(), done: make(chan struct{})}
	if !t.loop.Add(h) {
		return fmt.Errorf("%w: closed", ErrUnavailable)
	}
	select {
	case <-h.done:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchable says whether activity id may be watched: published and not
// yet ended. A sale that has not started is the one a crowd watches; one
// that is over has nobody to count. Anything else would make a sorted set
// for an id a caller made up (1,000 made-up ids were 1,000 sets).
func (t *Tracker) watchable(ctx context.Context, id int64) error {
	if t.acts == nil {
		return refusal.New(activity.ErrNotFound, "activity %d not found", id)
	}
	a, err := t.acts.Activity(ctx, id)
	switch {
	case errors.Is(err, activity.ErrNotFound):
		return refusal.New(activity.ErrNotFound, "activity %d not found", id)
	case err != nil:
		return fmt.Errorf("presence: activity %d: %w", id, err)
	case a.Status != activity.Published || !t.cfg.Now().Before(a.EndsAt):
		return refusal.New(activity.ErrEnded, "activity %d has ended: a heartbeat names no activity_id for it", id)
	}
	return nil
}

// write sends one batch: per sorted set one ZADD of every member (the
// latest heartbeat wins) and one trim of what expired, all in a pipeline.
func (t *Tracker) write(ctx context.Context, b []*beat) error {
	sets := map[string]map[string]int64{}
	add := func(key, member string, at int64) {
		s := sets[key]
		if s == nil {
			s = map[string]int64{}
			sets[key] = s
		}
		s[member] = max(s[member], at)
	}
	for _, h := range b {
		add(rediskeys.PresenceAll, h.member, h.at)
		if h.activity > 0 {
			add(rediskeys.For(h.activity).Watching, h.member, h.at)
		}
	}
	cutoff := strconv.FormatInt(t.cfg.Now().Add(-t.cfg.TTL).UnixMilli(), 10)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for key, members := range sets {
			zs := make([]redis.Z, 0, len(members))
			for m, at := range members {
				zs = append(zs, redis.Z{Score: float64(at), Member: m})
			}
			p.ZAdd(ctx, key, zs...)
			p.ZRemRangeByScore(ctx, key, "-inf", "("+cutoff)
			// A set nobody beats into any more goes with its last member.
			p.PExpire(ctx, key, t.cfg.TTL+time.Minute)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: heartbeat: %w", ErrUnavailable, err)
	}
	return nil
}

// Online counts the clients online now: overall, and watching activityID
// when it is positive.
func (t *Tracker) Online(ctx context.Context, activityID int64) (all, watching int64, err error) {
	from := strconv.FormatInt(t.cfg.Now().Add(-t.cfg.TTL).UnixMilli(), 10)
	var a, w *redis.IntCmd
	_, err = t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		a = p.ZCount(ctx, rediskeys.PresenceAll, from, "+inf")
		if activityID > 0 {
			w = p.ZCount(ctx, rediskeys.For(activityID).Watching, from, "+inf")
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w: online: %w", ErrUnavailable, err)
	}
	if w != nil {
		watching = w.Val()
	}
	return a.Val(), watching, nil
}

// LastSeen is c's last heartbeat (zero if none within the ttl) and whether
// it is online.
func (t *Tracker) LastSeen(ctx context.Context, c Client) (time.Time, bool, error) {
	m, err := c.member()
	if err != nil {
		return time.Time{}, false, err
	}
	ms, err := t.rdb.ZScore(ctx, rediskeys.PresenceAll, m).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: last seen: %w", ErrUnavailable, err)
	}
	seen := time.UnixMilli(int64(ms)).UTC()
	return seen, t.cfg.Now().Sub(seen) < t.cfg.TTL, nil
}
