package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// groupKeys are the keys of a group's scripts, in their order.
func groupKeys(k rediskeys.Activity, gid string) []string {
	return []string{k.Meta, k.Stock, k.Users, k.Orders, k.Outbox, k.Group(gid), k.GroupMembers(gid), k.Forming(),
		k.Unsettled(), k.Idem, k.Items, k.ItemUsers}
}

// OpenGroup runs open_group.lua (order.Store).
func (s *Orders) OpenGroup(ctx context.Context, gid, no string, r order.PlaceRequest) (order.Accepted, error) {
	return s.enterGroup(ctx, openGroupScript, "open", gid, no, r)
}

// JoinGroup runs join_group.lua (order.Store).
func (s *Orders) JoinGroup(ctx context.Context, gid, no string, r order.PlaceRequest) (order.Accepted, error) {
	return s.enterGroup(ctx, joinGroupScript, "join", gid, no, r)
}

func (s *Orders) enterGroup(ctx context.Context, script *redis.Script, op, gid, no string, r order.PlaceRequest) (order.Accepted, error) {
	act, err := order.ParseNo(gid)
	if err != nil {
		return order.Accepted{}, fmt.Errorf("%w: %s", order.ErrGroupNotFound, gid)
	}
	// A key used to open is the sale's; one used to join, the group's:
	// the same key sent to join two groups is two requests.
	field := ""
	switch {
	case r.IdempotencyKey == "":
	case op == "open":
		field = rediskeys.OpenIdempotencyField(r.UserID, r.IdempotencyKey)
	default:
		field = rediskeys.JoinIdempotencyField(gid, r.UserID, r.IdempotencyKey)
	}
	res, err := s.pipe.Run(ctx, script, groupKeys(rediskeys.For(act), gid), r.UserID, r.Quantity, no, gid, field, r.Item).Slice()
	if err != nil {
		return order.Accepted{}, unavailable(op+" group", err)
	}
	if len(res) != 7 {
		return order.Accepted{}, fmt.Errorf("redisstore: %s_group.lua returned %v", op, res)
	}
	num := func(i int) int64 { n, _ := res[i].(int64); return n }
	item, _ := res[6].(string)
	switch code := num(0); code {
	case 0:
		return order.Accepted{
			Order: order.Order{
				No: no, ActivityID: act, UserID: r.UserID, Quantity: r.Quantity, PriceCents: num(4),
				AmountCents: num(4) * int64(r.Quantity), Status: order.PendingPayment, CreatedAt: time.Now().UTC(),
				PayBy: time.UnixMilli(num(3)).UTC(), GroupID: gid, Item: item,
			},
			Remaining: num(1), Deadline: time.UnixMilli(num(2)).UTC(), Item: item, ItemRemaining: -1,
		}, nil
	case 7:
		existing, _ := res[5].(string)
		o, err := s.Get(ctx, existing)
		return order.Accepted{Order: o, Replay: true, ItemRemaining: -1}, err
	default:
		return order.Accepted{Remaining: num(1), Item: item, ItemRemaining: -1}, itemError(codeError(op+"_group", code), code, r.Item, num(1))
	}
}

// GetGroup reads group gid (order.Store).
func (s *Orders) GetGroup(ctx context.Context, gid string) (order.Group, error) {
	return s.getGroup(ctx, gid, false)
}

// GetGroupReplicated is GetGroup read together with a WAIT for the
// configured replicas (Config.Ack), in one pipeline: the worker records in
// MySQL only a group state a failover cannot take back.
func (s *Orders) GetGroupReplicated(ctx context.Context, gid string) (order.Group, error) {
	return s.getGroup(ctx, gid, true)
}

func (s *Orders) getGroup(ctx context.Context, gid string, acked bool) (order.Group, error) {
	act, err := order.ParseNo(gid)
	if err != nil {
		return order.Group{}, fmt.Errorf("%w: %s", order.ErrGroupNotFound, gid)
	}
	k := rediskeys.For(act)
	var g *redis.MapStringStringCmd
	var m *redis.MapStringStringCmd
	ack := redispipe.Ack{}
	if acked {
		ack = s.cfg.Ack
	}
	err = redispipe.ReadAcked(ctx, s.rdb, ack, func(p redis.Pipeliner) {
		g = p.HGetAll(ctx, k.Group(gid))
		m = p.HGetAll(ctx, k.GroupMembers(gid))
	})
	if err != nil {
		return order.Group{}, unavailable("group", err)
	}
	f := g.Val()
	if len(f) == 0 {
		return order.Group{}, fmt.Errorf("%w: %s", order.ErrGroupNotFound, gid)
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	out := order.Group{
		ID: gid, ActivityID: act, Status: order.GroupStatus(f["status"]), Size: int(num("size")), Members: int(num("members")),
		Paid: int(num("paid")), LeaderID: num("leader"), CreatedAt: time.UnixMilli(num("created_ms")).UTC(),
		ExpiresAt: time.UnixMilli(num("expires_ms")).UTC(), MemberOrders: map[int64]string{}, Item: f["item"],
	}
	switch out.Status {
	case order.Succeeded:
		out.EndedAt = time.UnixMilli(num("succeeded_ms")).UTC()
	case order.Failed:
		out.EndedAt = time.UnixMilli(num("failed_ms")).UTC()
	}
	if out.EndedAt.UnixMilli() == 0 {
		out.EndedAt = time.Time{} // a group ended before its hash kept the time
	}
	for user, no := range m.Val() {
		id, _ := strconv.ParseInt(user, 10, 64)
		out.MemberOrders[id] = no
	}
	return out, nil
}

// Forming returns up to limit of activity id's groups with a free place,
// soonest deadline first (order.Store).
func (s *Orders) Forming(ctx context.Context, id int64, limit int64) ([]order.Group, error) {
	k := rediskeys.For(id)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.Forming(), Start: "(" + now, Stop: "+inf", ByScore: true, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: forming groups: %w", order.ErrUnavailable, err)
	}
	out := make([]order.Group, 0, len(ids))
	for _, gid := range ids {
		g, err := s.GetGroup(ctx, gid)
		if errors.Is(err, order.ErrGroupNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// Overdue returns up to limit of activity id's groups still unsettled more
// than olderThan after their deadline (by this process's clock: it only
// decides what to look at; settle_group.lua decides by Redis time).
func (s *Orders) Overdue(ctx context.Context, id int64, olderThan time.Duration, limit int64) ([]string, error) {
	max := strconv.FormatInt(time.Now().Add(-olderThan).UnixMilli(), 10)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: rediskeys.For(id).Unsettled(), Start: "-inf", Stop: max, ByScore: true, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: unsettled groups: %w", order.ErrUnavailable, err)
	}
	return ids, nil
}

// Forget drops group gid from the unsettled index (its records are gone).
func (s *Orders) Forget(ctx context.Context, gid string) error {
	act, err := order.ParseNo(gid)
	if err != nil {
		return err
	}
	return s.rdb.ZRem(ctx, rediskeys.For(act).Unsettled(), gid).Err()
}

// FailIfDue runs settle_group.lua: it fails group gid if its deadline
// passed before it succeeded, and returns its status and member orders
// (order.Store).
func (s *Orders) FailIfDue(ctx context.Context, gid string) (order.GroupStatus, []string, error) {
	act, err := order.ParseNo(gid)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s", order.ErrGroupNotFound, gid)
	}
	k := rediskeys.For(act)
	res, err := settleScript.Run(ctx, s.rdb, []string{k.Meta, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Unsettled()}, gid).StringSlice()
	if err != nil {
		return "", nil, fmt.Errorf("%w: settle: %w", order.ErrUnavailable, err)
	}
	if len(res) < 2 || res[0] == "" {
		return "", nil, fmt.Errorf("%w: %s", order.ErrGroupNotFound, gid)
	}
	return order.GroupStatus(res[0]), res[2:], nil
}
