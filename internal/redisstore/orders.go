package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// Get reads order no from Redis, or order.ErrNotFound. The order is
// persisted (in MySQL) when its record says so or it is off the outbox:
// the worker's marks only take orders off the outbox (persisted.lua).
func (s *Orders) Get(ctx context.Context, no string) (order.Order, error) {
	return s.get(ctx, no, false)
}

// GetAcked is Get with the replicas' WAIT in the same pipeline
// (redispipe.ReadAcked; order.Store).
func (s *Orders) GetAcked(ctx context.Context, no string) (order.Order, error) {
	return s.get(ctx, no, true)
}

func (s *Orders) get(ctx context.Context, no string, acked bool) (order.Order, error) {
	k, err := noKeys(no)
	if err != nil {
		return order.Order{}, err
	}
	if !acked {
		// Through the pipe, batched with other callers' scripts
		// (read_order.lua).
		res, err := s.pipe.RunRead(ctx, readOrderScript, []string{k.Orders, k.Outbox}, no).Slice()
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
		return recordOrder(no, k.ID, rec, res[1] != nil), nil
	}
	var rec *redis.StringCmd
	var queued *redis.FloatCmd
	err = redispipe.ReadAcked(ctx, s.rdb, s.cfg.Ack, func(p redis.Pipeliner) {
		rec = p.HGet(ctx, k.Orders, no)
		queued = p.ZScore(ctx, k.Outbox, no)
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return order.Order{}, unavailable("get", err)
	}
	if rec.Err() != nil {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	return recordOrder(no, k.ID, rec.Val(), !errors.Is(queued.Err(), redis.Nil)), nil
}

// recordOrder is order no of sale act as its record says, persisted (in
// MySQL) when the record says so or it is not on the outbox (queued false):
// the worker's marks only take orders off the outbox (persisted.lua).
func recordOrder(no string, act int64, rec string, queued bool) order.Order {
	o := parseRecord(no, act, rec)
	o.Persisted = o.Persisted || !queued
	return o
}

// GetMany reads orders nos from Redis — one HMGET per sale among them, in
// one pipeline which, with acks configured (Config.Ack), ends with a probe
// and a WAIT for the replicas: the worker records in MySQL only what a
// failover cannot take back, and reads and WAIT are of one server
// (redispipe.ReadAcked). Orders whose record is gone are left out and
// named in missing.
func (s *Orders) GetMany(ctx context.Context, nos []string) (found []order.Order, missing []string, err error) {
	type sale struct {
		k    rediskeys.Activity
		nos  []string
		read *redis.SliceCmd
	}
	var sales []*sale
	bySale := map[string]*sale{}
	for _, no := range nos {
		k, err := noKeys(no)
		if err != nil {
			return nil, nil, err
		}
		sl := bySale[k.Orders]
		if sl == nil {
			sl = &sale{k: k}
			bySale[k.Orders] = sl
			sales = append(sales, sl)
		}
		sl.nos = append(sl.nos, no)
	}
	err = redispipe.ReadAcked(ctx, s.rdb, s.cfg.Ack, func(p redis.Pipeliner) {
		for _, sl := range sales {
			sl.read = p.HMGet(ctx, sl.k.Orders, sl.nos...)
		}
	})
	if err != nil {
		return nil, nil, unavailable("get", err)
	}
	found = make([]order.Order, 0, len(nos))
	for _, sl := range sales {
		for i, v := range sl.read.Val() {
			if rec, ok := v.(string); ok {
				found = append(found, parseRecord(sl.nos[i], sl.k.ID, rec))
			} else {
				missing = append(missing, sl.nos[i])
			}
		}
	}
	return found, missing, nil
}

// Transition runs transition.lua (order.Store): the order after, from the
// record the script wrote, when it is done.
func (s *Orders) Transition(ctx context.Context, c order.Change) (order.Order, error) {
	k, err := noKeys(c.No)
	if err != nil {
		return order.Order{}, err
	}
	user := ""
	if c.UserID != 0 {
		user = strconv.FormatInt(c.UserID, 10)
	}
	gid := c.GroupID
	if gid == "" {
		gid = "-" // keys must be named (and in the slot) even when unused
	}
	res, err := s.pipe.Run(ctx, transitionScript,
		[]string{k.Meta, k.Stock, k.Users, k.Orders, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Outbox, k.Items, k.ItemUsers},
		string(c.Action), c.Fence, k.Restock, user, c.GroupID, c.No, c.PaymentID).Slice()
	if err != nil {
		return order.Order{}, unavailable(string(c.Action), err)
	}
	if len(res) < 3 {
		return order.Order{}, fmt.Errorf("redisstore: transition.lua returned %v", res)
	}
	code, _ := res[0].(int64)
	if code != 0 {
		status, _ := res[1].(string)
		return order.Order{}, codeErrorWithStatus("transition", code, status)
	}
	if len(res) != 5 {
		return order.Order{}, fmt.Errorf("redisstore: transition.lua returned %v", res)
	}
	rec, ok := res[3].(string)
	if !ok {
		return order.Order{}, fmt.Errorf("redisstore: transition.lua returned %v", res)
	}
	queued, _ := res[4].(int64)
	return recordOrder(c.No, k.ID, rec, queued == 1), nil
}

// MarkPersisted notes that o, as read from Redis, is in MySQL, and takes it
// off the outbox unless it has changed since (persisted.lua).
func (s *Orders) MarkPersisted(ctx context.Context, o order.Order) error {
	return s.MarkPersistedMany(ctx, []order.Order{o})
}

// MarkPersistedMany is MarkPersisted for many orders: one persisted.lua
// call per sale among them, in one pipeline.
func (s *Orders) MarkPersistedMany(ctx context.Context, orders []order.Order) error {
	var calls []*luascript.Call
	bySale := map[string]*luascript.Call{}
	for _, o := range orders {
		k, err := noKeys(o.No)
		if err != nil {
			return err
		}
		c := bySale[k.Orders]
		if c == nil {
			c = &luascript.Call{Keys: []string{k.Orders, k.Outbox}}
			bySale[k.Orders] = c
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
// outbox (every shard's) for longer than grace: accepted or changed, not
// yet in MySQL.
func (s *Orders) Unpersisted(ctx context.Context, id int64, grace time.Duration, max int64) ([]order.OutboxEntry, error) {
	n, err := s.shardsOf(ctx, id)
	if err != nil {
		return nil, err
	}
	until := strconv.FormatInt(time.Now().Add(-grace).UnixMilli(), 10)
	var out []order.OutboxEntry
	for sh := 0; sh < n && int64(len(out)) < max; sh++ {
		entries, err := s.rdb.ZRangeByScoreWithScores(ctx, rediskeys.ForShard(id, sh, n).Outbox,
			&redis.ZRangeBy{Min: "-inf", Max: until, Count: max - int64(len(out))}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("%w: outbox: %w", order.ErrUnavailable, err)
		}
		for _, e := range entries {
			no, ok := e.Member.(string)
			if !ok {
				continue
			}
			out = append(out, order.OutboxEntry{ID: no, No: no, Since: time.UnixMilli(int64(e.Score))})
		}
	}
	return out, nil
}

// CountUnpersisted counts activity id's outbox entries older than grace,
// over all its shards, however many (ZCOUNT: no listing).
func (s *Orders) CountUnpersisted(ctx context.Context, id int64, grace time.Duration) (int64, error) {
	n, err := s.shardsOf(ctx, id)
	if err != nil {
		return 0, err
	}
	until := strconv.FormatInt(time.Now().Add(-grace).UnixMilli(), 10)
	var total int64
	for sh := range n {
		c, err := s.rdb.ZCount(ctx, rediskeys.ForShard(id, sh, n).Outbox, "-inf", until).Result()
		if err != nil {
			return 0, fmt.Errorf("%w: outbox: %w", order.ErrUnavailable, err)
		}
		total += c
	}
	return total, nil
}

// DropOutboxEntry takes entry id (an order no) off activity act's outbox
// (its shard's): its order record is gone (kept as long as the sale's
// keys, which ran out), so there is nothing left to write.
func (s *Orders) DropOutboxEntry(ctx context.Context, act int64, id string) error {
	k := rediskeys.For(act)
	if nk, err := noKeys(id); err == nil && nk.ID == act {
		k = nk
	}
	if err := s.rdb.ZRem(ctx, k.Outbox, id).Err(); err != nil {
		return fmt.Errorf("%w: outbox: %w", order.ErrUnavailable, err)
	}
	return nil
}
