package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// Accept runs accept.lua for a new order numbered no (order.Store). With
// held, the per-user lock of internal/lock, it runs as the lock's finish:
// accept and release in one script, through the same acknowledged batcher,
// and only while the lock is held. Either way concurrent accepts merge
// into one run of the script (luascript.Merged), which reads and writes
// what they share once. Were the lock lost by then (its ttl ran out
// unrenewed), the accept runs by itself: it is atomic on its own, the lock
// only serialises a user's requests. A deferred lock (Locks.Obtain with
// order.LockOptions.Defer) the accept takes itself: when nobody holds it,
// the lock's check, its guard (the rate limit) and the accept are one
// script, and nothing is written for the lock (lock.Deferred.RunWith).
func (s *Store) Accept(ctx context.Context, no string, r order.PlaceRequest, held order.Lock) (order.Accepted, error) {
	k := rediskeys.For(r.ActivityID)
	field := ""
	if r.IdempotencyKey != "" {
		field = rediskeys.IdempotencyField(r.UserID, r.IdempotencyKey)
	}
	keys := []string{k.Meta, k.Stock, k.Users, k.Orders, k.Idem, k.Outbox}
	args := []any{r.UserID, r.Quantity, no, field}
	var res []any
	var err error
	if d, ok := held.(*deferredLock); ok {
		var reply any
		reply, err = d.RunWith(ctx, s.batch, acceptFinish, keys, args...)
		var refused *lock.Refused
		var waited *lock.WaitError
		switch {
		case errors.As(err, &refused) && d.limit != nil:
			// Over the limit — or this very call sent again after a lost
			// answer (go-redis resends a pipeline after a read timeout):
			// its first run charged the limit and accepted, and the second
			// charge refused. The order's number is this call's own, so an
			// order under it is that first run's: the answer.
			if o, gerr := s.readRefused(ctx, no); gerr == nil && o.UserID == r.UserID {
				return order.Accepted{Order: o, Remaining: -1}, nil
			}
			return order.Accepted{}, rateLimited(d.limit, refused)
		case errors.As(err, &waited):
			return order.Accepted{}, fmt.Errorf("%w: %w", order.ErrLockWait, err)
		case errors.Is(err, lock.ErrNotHeld):
			// Waited for, obtained, and lost before the accept ran.
			res, err = s.batch.RunMerged(ctx, acceptMerged, "", keys, args...).Slice()
		case err == nil:
			res, _ = reply.([]any)
		}
	} else if l, ok := held.(*lock.Lock); ok {
		var reply any
		reply, err = l.ReleaseWith(ctx, s.batch, acceptFinish, keys, args...)
		if errors.Is(err, lock.ErrNotHeld) {
			res, err = s.batch.RunMerged(ctx, acceptMerged, "", keys, args...).Slice()
		} else if err == nil {
			res, _ = reply.([]any)
		}
	} else {
		if held != nil {
			defer held.Release(context.WithoutCancel(ctx)) //nolint:errcheck // a failed release expires
		}
		res, err = s.batch.RunMerged(ctx, acceptMerged, "", keys, args...).Slice()
	}
	if err != nil {
		return order.Accepted{}, unavailable("accept", err)
	}
	if len(res) != 7 {
		return order.Accepted{}, fmt.Errorf("redisstore: accept.lua returned %v", res)
	}
	num := func(i int) int64 { n, _ := res[i].(int64); return n }
	switch code := num(0); code {
	case 0:
		return order.Accepted{
			Order: order.Order{
				No: no, ActivityID: r.ActivityID, UserID: r.UserID, Quantity: r.Quantity,
				PriceCents: num(6), AmountCents: num(6) * int64(r.Quantity), Status: order.PendingPayment,
				CreatedAt: time.UnixMilli(num(4)).UTC(), PayBy: time.UnixMilli(num(5)).UTC(),
			},
			Remaining: num(2),
		}, nil
	case 7:
		existing, _ := res[1].(string)
		o, err := s.Get(ctx, existing)
		return order.Accepted{Order: o, Replay: true}, err
	default:
		return order.Accepted{Remaining: num(2)}, enterRefusal("accept", code)
	}
}

// Get reads order no from Redis, or order.ErrNotFound. The order is
// persisted (in MySQL) when its record says so or it is off the outbox:
// the worker's marks only take orders off the outbox (persisted.lua).
func (s *Store) Get(ctx context.Context, no string) (order.Order, error) {
	act, err := order.ParseNo(no)
	if err != nil {
		return order.Order{}, err
	}
	k := rediskeys.For(act)
	var rec *redis.StringCmd
	var queued *redis.FloatCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.HGet(ctx, k.Orders, no)
		queued = p.ZScore(ctx, k.Outbox, no)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return order.Order{}, fmt.Errorf("%w: get: %w", order.ErrUnavailable, err)
	}
	if rec.Err() != nil {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	o := parseRecord(no, act, rec.Val())
	o.Persisted = o.Persisted || errors.Is(queued.Err(), redis.Nil)
	return o, nil
}

// readRefused is Get for Accept's check of an order the rate limit refused:
// the same answer, read through the batcher, so a storm of refusals reads
// in one script per pipeline (read_order.lua), not a round trip each. Not
// Get itself: with acks configured the batcher's pipelines end with the
// replicas' WAIT, right before answering an order 202 (it must be
// replicated) but not for a plain read, which answers while a replica is
// down.
func (s *Store) readRefused(ctx context.Context, no string) (order.Order, error) {
	act, err := order.ParseNo(no)
	if err != nil {
		return order.Order{}, err
	}
	k := rediskeys.For(act)
	res, err := s.batch.RunMerged(ctx, readOrderMerged, "", []string{k.Orders, k.Outbox}, no).Slice()
	if err != nil {
		return order.Order{}, unavailable("get", err)
	}
	if len(res) != 2 {
		return order.Order{}, fmt.Errorf("redisstore: read_order.lua returned %v", res)
	}
	rec, ok := res[0].(string)
	if !ok {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	o := parseRecord(no, act, rec)
	o.Persisted = o.Persisted || res[1] == int64(0)
	return o, nil
}

// GetMany reads orders nos from Redis — one HMGET per sale among them, in
// one pipeline which, with acks configured (Config.Ack), ends with a probe
// and a WAIT for the replicas: the worker records in MySQL only what a
// failover cannot take back, and reads and WAIT are of one server
// (redispipe.ReadAcked). Orders whose record is gone are left out and
// named in missing.
func (s *Store) GetMany(ctx context.Context, nos []string) (found []order.Order, missing []string, err error) {
	type sale struct {
		act  int64
		nos  []string
		read *redis.SliceCmd
	}
	var sales []*sale
	bySale := map[int64]*sale{}
	for _, no := range nos {
		act, err := order.ParseNo(no)
		if err != nil {
			return nil, nil, err
		}
		sl := bySale[act]
		if sl == nil {
			sl = &sale{act: act}
			bySale[act] = sl
			sales = append(sales, sl)
		}
		sl.nos = append(sl.nos, no)
	}
	err = redispipe.ReadAcked(ctx, s.rdb, s.cfg.Ack, func(p redis.Pipeliner) {
		for _, sl := range sales {
			sl.read = p.HMGet(ctx, rediskeys.For(sl.act).Orders, sl.nos...)
		}
	})
	if err != nil {
		return nil, nil, unavailable("get", err)
	}
	for _, sl := range sales {
		for i, v := range sl.read.Val() {
			if rec, ok := v.(string); ok {
				found = append(found, parseRecord(sl.nos[i], sl.act, rec))
			} else {
				missing = append(missing, sl.nos[i])
			}
		}
	}
	return found, missing, nil
}

// Transition runs transition.lua (order.Store).
func (s *Store) Transition(ctx context.Context, c order.Change) error {
	act, err := order.ParseNo(c.No)
	if err != nil {
		return err
	}
	k := rediskeys.For(act)
	user := ""
	if c.UserID != 0 {
		user = strconv.FormatInt(c.UserID, 10)
	}
	gid := c.GroupID
	if gid == "" {
		gid = "-" // keys must be named (and in the slot) even when unused
	}
	res, err := s.batch.Run(ctx, transitionScript,
		[]string{k.Meta, k.Stock, k.Users, k.Orders, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Outbox},
		string(c.Action), c.Fence, k.Restock, user, c.GroupID, c.No).Slice()
	if err != nil {
		return unavailable(string(c.Action), err)
	}
	if len(res) != 3 {
		return fmt.Errorf("redisstore: transition.lua returned %v", res)
	}
	code, _ := res[0].(int64)
	if code == 0 {
		return nil
	}
	status, _ := res[1].(string)
	return transitionRefusal(code, status)
}

// MarkPersisted notes that o, as read from Redis, is in MySQL, and takes it
// off the outbox unless it has changed since (persisted.lua).
func (s *Store) MarkPersisted(ctx context.Context, o order.Order) error {
	return s.MarkPersistedMany(ctx, []order.Order{o})
}

// MarkPersistedMany is MarkPersisted for many orders: one persisted.lua
// call per sale among them, in one pipeline.
func (s *Store) MarkPersistedMany(ctx context.Context, orders []order.Order) error {
	var calls []*luascript.Call
	bySale := map[int64]*luascript.Call{}
	for _, o := range orders {
		act, err := order.ParseNo(o.No)
		if err != nil {
			return err
		}
		c := bySale[act]
		if c == nil {
			k := rediskeys.For(act)
			c = &luascript.Call{Keys: []string{k.Orders, k.Outbox}}
			bySale[act] = c
			calls = append(calls, c)
		}
		c.Args = append(c.Args, o.No, o.Fence)
	}
	run := func(eval func(p redis.Pipeliner, c *luascript.Call) *redis.Cmd) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				eval(p, c)
			}
			return nil
		})
		return err
	}
	err := run(func(p redis.Pipeliner, c *luascript.Call) *redis.Cmd {
		return persistedScript.EvalSha(ctx, p, c.Keys, c.Args...)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A pipeline cannot fall back script by script: send the source.
		err = run(func(p redis.Pipeliner, c *luascript.Call) *redis.Cmd {
			return persistedScript.Eval(ctx, p, c.Keys, c.Args...)
		})
	}
	if err != nil {
		return fmt.Errorf("%w: mark persisted: %w", order.ErrUnavailable, err)
	}
	return nil
}

// Unpersisted returns up to max orders that have waited in activity id's
// outbox for longer than grace: accepted or changed, not yet in MySQL.
func (s *Store) Unpersisted(ctx context.Context, id int64, grace time.Duration, max int64) ([]order.OutboxEntry, error) {
	until := strconv.FormatInt(time.Now().Add(-grace).UnixMilli(), 10)
	entries, err := s.rdb.ZRangeByScoreWithScores(ctx, rediskeys.For(id).Outbox,
		&redis.ZRangeBy{Min: "-inf", Max: until, Count: max}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: outbox: %w", order.ErrUnavailable, err)
	}
	out := make([]order.OutboxEntry, 0, len(entries))
	for _, e := range entries {
		no, ok := e.Member.(string)
		if !ok {
			continue
		}
		out = append(out, order.OutboxEntry{ID: no, No: no, Since: time.UnixMilli(int64(e.Score))})
	}
	return out, nil
}

// DropOutboxEntry takes entry id (an order no) off activity act's outbox:
// its order record is gone (kept as long as the sale's keys, which ran
// out), so there is nothing left to write.
func (s *Store) DropOutboxEntry(ctx context.Context, act int64, id string) error {
	if err := s.rdb.ZRem(ctx, rediskeys.For(act).Outbox, id).Err(); err != nil {
		return fmt.Errorf("%w: outbox: %w", order.ErrUnavailable, err)
	}
	return nil
}
