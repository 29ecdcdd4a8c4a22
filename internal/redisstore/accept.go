package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Accept accepts a new order numbered no (order.Store): the user's turn t
// — the per-user lock and rate limit — and the accept, in one script,
// place.lua, where it can:
//
//   - the lock free (the usual case): not taken at all. place.lua checks
//     that nobody holds it, charges the limit and accepts (lock elision:
//     lock.Client.Elide);
//   - the lock held by another request (a double tap in flight, an
//     operator's hold), or t.Hold: the lock is obtained, waiting at most
//     t.Wait, and place.lua runs only while it is still held, releasing
//     it (lock.Lock.ReleaseIn);
//   - Redis Cluster: as above, the per-user locks in the shard's slot
//     (rediskeys.ShardLockTable) and the order's rate limit too
//     (rediskeys.Activity.RateLimit): a user's orders of one sale have a
//     budget of their own there, which place.lua charges, rather than the
//     user's one budget over every sale and route, which is in another
//     slot and would cost every order a script and a round trip more, on
//     another master (docs/orders.md, "The rate limit on Redis Cluster").
//
// Concurrent orders of one sale run as one script (the pipe merges their
// calls); different sales' never share a run, so a failure in one sale is
// its own.
func (s *Orders) Accept(ctx context.Context, no string, r order.PlaceRequest, t order.UserTurn) (order.Accepted, error) {
	n, err := s.shardsOf(ctx, r.ActivityID)
	if err != nil {
		return order.Accepted{}, err
	}
	shard := activity.ShardOf(r.UserID, n)
	c := placeCall{no: order.InShard(no, shard, n), r: r, limit: t.Limit, keys: rediskeys.ForShard(r.ActivityID, shard, n)}
	if n > 1 || s.cluster {
		// The per-user locks in the shard's own slot: on a cluster the lock,
		// the accept and the release are then one script, as on one server.
		t.Options.Set = rediskeys.ShardLockTable(r.ActivityID, shard, n)
	}
	acc, err := s.accept(ctx, c, t)
	if n == 1 {
		return acc, err
	}
	if errors.Is(err, activity.ErrSoldOut) {
		acc, err = s.acceptPulling(ctx, c, shard, acc, err)
	}
	if err == nil && acc.Remaining == 0 {
		acc.Remaining = -1 // the shard's last: not the sale's (no local sold-out flag)
	}
	// A sale in shards sells one item (activity.Validate): its item's
	// units are the sale's, and a shard's last unit is not the item's.
	acc.ItemRemaining = acc.Remaining
	return acc, err
}

// acceptPulling places c again after pulling units into its shard, which
// had too few for it (refused), until it is accepted, refused otherwise,
// or the pull finds it cannot be served: refused as sold out, with
// Remaining what the sale holds (0 only from a snapshot of every shard
// empty: the local sold-out flag's cue). The lock and the rate limit were
// the first attempt's.
func (s *Orders) acceptPulling(ctx context.Context, c placeCall, shard int, acc order.Accepted, refused error) (order.Accepted, error) {
	c.limit = nil
	for try := 0; try < maxPulls; try++ {
		more, left, err := s.cfg.Shards.Pull(ctx, c.r.ActivityID, shard, int64(c.r.Quantity))
		if err != nil {
			return order.Accepted{}, unavailable("pull", err)
		}
		if !more {
			acc.Remaining = left
			return acc, refused
		}
		acc, refused = c.outcome(s.place(ctx, c, lockNone, lock.Ref{}))
		if !errors.Is(refused, activity.ErrSoldOut) {
			return acc, refused
		}
	}
	return order.Accepted{}, unavailable("pull", errors.New("units pulled into the shard were taken by others each time"))
}

// maxPulls bounds the pulls of one order: each is answered either units
// (taken by the order, or by others of its shard first) or none anywhere.
const maxPulls = 20

// accept is Accept of c in its shard: the lock, the rate limit, the accept
// and the release in the shard's slot, on one server or a cluster alike.
func (s *Orders) accept(ctx context.Context, c placeCall, t order.UserTurn) (order.Accepted, error) {
	if !t.Lock || s.cfg.Locks == nil {
		return c.outcome(s.place(ctx, c, lockNone, lock.Ref{}))
	}
	key, opts := t.Key, lockOptions(t.Options)
	if !t.Hold {
		if e, ok := s.cfg.Locks.Elide(key, opts...); ok {
			p := s.place(ctx, c, lockElide, e.Ref)
			e.Checked(!p.busy)
			if !p.busy {
				return c.outcome(p)
			}
		}
	}
	l, err := s.cfg.Locks.Obtain(ctx, key, t.TTL, withWait(opts, t.Wait)...)
	if err != nil {
		return order.Accepted{}, fmt.Errorf("%w: %w", order.ErrLockWait, lockWaitError(err))
	}
	var p placeAnswer
	err = l.ReleaseIn(ctx, func(ref lock.Ref) (int64, error) {
		p = s.place(ctx, c, lockHeld, ref)
		if p.notHeld {
			return 0, nil
		}
		return p.release, p.failed
	})
	switch {
	case errors.Is(err, lock.ErrNotHeld):
		// Obtained, and lost before the script ran (its ttl ran out
		// unrenewed): the accept runs by itself. It is atomic on its own;
		// the lock only serialises a user's requests.
		return c.outcome(s.place(ctx, c, lockNone, lock.Ref{}))
	case err != nil && p.failed == nil:
		return order.Accepted{}, unavailable("accept", err)
	}
	return c.outcome(p)
}

// withWait is opts bounding the wait for the lock by wait (0: none).
func withWait(opts []lock.Option, wait time.Duration) []lock.Option {
	if wait <= 0 {
		return opts
	}
	return append(opts[:len(opts):len(opts)], lock.WithMaxWait(wait))
}

// How place.lua holds a call's lock (its last argument).
const (
	lockNone  = "none"  // no lock
	lockElide = "elide" // nobody took it: go on only if nobody holds it
	lockHeld  = "held"  // the request holds it: go on only if it still does, and release it
)

// placeCall is one order for place.lua.
type placeCall struct {
	no    string
	r     order.PlaceRequest
	limit *order.RateLimit   // charged in the script; nil: none
	keys  rediskeys.Activity // of the user's shard of the sale
}

// placeAnswer is what place.lua answered one call.
type placeAnswer struct {
	acc     order.Accepted
	refusal error // the order's refusal: the sale's, the rate limit's, ...
	failed  error // the script did not answer (Redis, acks)
	busy    bool  // lockElide: someone holds the lock; nothing ran
	notHeld bool  // lockHeld: the lock was no longer the request's; nothing ran
	release int64 // lockHeld: lock_release's code
	replay  string
}

// place runs place.lua for c with its lock in mode (ref: the lock's, for
// lockElide and lockHeld).
func (s *Orders) place(ctx context.Context, c placeCall, mode string, ref lock.Ref) placeAnswer {
	k := c.keys
	rate, rateKey := "0", k.Meta
	if c.limit != nil {
		rate = strconv.Itoa(c.limit.PerSecond)
		if s.cluster {
			rateKey = k.RateLimit(c.limit.Scope) // the user's budget in the sale, in its slot
		} else {
			rateKey = rediskeys.RateLimit(c.limit.Scope, c.limit.Who, 1) // the one budget (RateShards: 1 off a cluster)
		}
	}
	lockKeys := [2]string{k.Meta, k.Meta} // unused: keys of the sale's slot
	if mode != lockNone {
		lockKeys = ref.Keys
	}
	field := ""
	if c.r.IdempotencyKey != "" {
		field = rediskeys.IdempotencyField(c.r.UserID, c.r.IdempotencyKey)
	}
	keys := []string{rateKey, k.Meta, k.Stock, k.Users, k.Orders, k.Idem, k.Outbox, k.Items, k.ItemUsers, lockKeys[0], lockKeys[1]}
	args := []any{rate, c.r.UserID, c.r.Quantity, c.no, field, c.r.Item, ref.Args[0], ref.Args[1], ref.Args[2], mode}
	// One sale's calls per run (the group): a failing sale fails only its own.
	res, err := s.pipe.RunMerged(ctx, placeMerged, k.Meta, keys, args...).Slice()
	if err != nil {
		return placeAnswer{failed: err}
	}
	return s.placeReply(ctx, c, mode, res)
}

// placeReply reads place.lua's answer res for c.
func (s *Orders) placeReply(ctx context.Context, c placeCall, mode string, res []any) placeAnswer {
	num := func(i int) int64 {
		if i < len(res) {
			n, _ := res[i].(int64)
			return n
		}
		return 0
	}
	code := num(0)
	var p placeAnswer
	if mode == lockHeld && code != codeLockLost && len(res) > 0 {
		p.release = num(len(res) - 1)
		res = res[:len(res)-1]
	}
	switch code {
	case codeLockBusy:
		p.busy = true
	case codeLockLost:
		p.notHeld = true
	case codeRateLimited:
		secs := ""
		if len(res) > 1 {
			secs, _ = res[1].(string)
		}
		p.refusal = &order.RateLimited{PerSecond: c.limit.PerSecond, RetryAfter: parseRetryAfter(secs)}
	case codeAccepted:
		if len(res) != 9 {
			p.failed = fmt.Errorf("redisstore: place.lua returned %v", res)
			break
		}
		r := c.r
		item, _ := res[7].(string)
		p.acc = order.Accepted{
			Order: order.Order{
				No: c.no, ActivityID: r.ActivityID, UserID: r.UserID, Quantity: r.Quantity,
				PriceCents: num(6), AmountCents: num(6) * int64(r.Quantity), Status: order.PendingPayment,
				CreatedAt: time.UnixMilli(num(4)).UTC(), PayBy: time.UnixMilli(num(5)).UTC(), Item: item,
			},
			Remaining: num(8), ItemRemaining: num(2),
		}
	case codeReplay:
		p.replay, _ = res[1].(string)
		o, err := s.Get(ctx, p.replay)
		p.acc, p.refusal = order.Accepted{Order: o, Replay: true, Remaining: -1, ItemRemaining: -1}, err
	default:
		item, _ := res[min(7, len(res)-1)].(string)
		p.acc.Remaining, p.acc.ItemRemaining, p.acc.Item = num(8), num(2), item
		p.refusal = itemError(codeError("place", code), code, c.r.Item, num(2))
	}
	return p
}

// outcome is Accept's answer for p.
func (c placeCall) outcome(p placeAnswer) (order.Accepted, error) {
	switch {
	case p.failed != nil:
		return order.Accepted{}, unavailable("accept", p.failed)
	case p.busy || p.notHeld:
		// Only a mode that expects them gets them (Accept handles both).
		return order.Accepted{}, fmt.Errorf("%w: place.lua answered for a lock not asked for", order.ErrUnavailable)
	}
	return p.acc, p.refusal
}

// Keyed returns the order r's Idempotency-Key made in its sale
// (order.Store): one read of the key's field and one of the order.
func (s *Orders) Keyed(ctx context.Context, r order.PlaceRequest) (order.Order, error) {
	k, err := s.userKeys(ctx, r.ActivityID, r.UserID)
	if err != nil {
		return order.Order{}, err
	}
	no, err := s.rdb.HGet(ctx, k.Idem, rediskeys.IdempotencyField(r.UserID, r.IdempotencyKey)).Result()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return order.Order{}, fmt.Errorf("%w: no order for this Idempotency-Key", order.ErrNotFound)
		}
		return order.Order{}, unavailable("get", err)
	}
	return s.Get(ctx, no)
}
