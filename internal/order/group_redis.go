package order

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// GroupStatus is where a group buy's group is.
type GroupStatus string

// The group statuses: forming until its size have paid (succeeded) or its
// deadline passes first (failed).
const (
	Forming   GroupStatus = "forming"
	Succeeded GroupStatus = "succeeded"
	Failed    GroupStatus = "failed"
)

// Group is a group buy's group.
type Group struct {
	ID         string
	ActivityID int64
	Status     GroupStatus
	Size       int
	Members    int // current members (an unpaid member that left frees its slot)
	Paid       int
	LeaderID   int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	// MemberOrders maps each member (user id) to its order number.
	MemberOrders map[int64]string
}

// groupKeys are the keys of a group's scripts, in their order.
func groupKeys(k rediskeys.Activity, gid, no string) []string {
	return []string{k.Meta, k.Stock, k.Users, k.Order(no), k.Outbox, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Unsettled()}
}

// enterGroup runs open_group.lua or join_group.lua.
func (s *Redis) enterGroup(ctx context.Context, script *redis.Script, gid, no string, userID int64, qty int) (Order, time.Time, error) {
	act, err := ParseNo(gid)
	if err != nil {
		return Order{}, time.Time{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	res, err := script.Run(ctx, s.rdb, groupKeys(rediskeys.For(act), gid, no), userID, qty, no, gid, s.retention.Milliseconds()).Int64Slice()
	if err != nil {
		return Order{}, time.Time{}, fmt.Errorf("%w: group: %w", ErrUnavailable, err)
	}
	if len(res) != 5 {
		return Order{}, time.Time{}, fmt.Errorf("order: group script returned %v", res)
	}
	expires := time.UnixMilli(res[2]).UTC()
	switch res[0] {
	case 0:
		return Order{
			No: no, ActivityID: act, UserID: userID, Quantity: qty, PriceCents: res[4], AmountCents: res[4] * int64(qty),
			Status: PendingPayment, CreatedAt: time.Now().UTC(), PayBy: time.UnixMilli(res[3]).UTC(), GroupID: gid,
		}, expires, nil
	case 8:
		return Order{}, time.Time{}, fmt.Errorf("%w: groups are for group buys", ErrWrongType)
	case 9:
		return Order{}, time.Time{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	case 10:
		return Order{}, expires, ErrGroupClosed
	case 11:
		return Order{}, expires, ErrAlreadyMember
	case 12:
		return Order{}, expires, ErrGroupFull
	}
	return Order{}, time.Time{}, saleRefusal(res[0])
}

// GetGroup reads group gid.
func (s *Redis) GetGroup(ctx context.Context, gid string) (Group, error) {
	act, err := ParseNo(gid)
	if err != nil {
		return Group{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	k := rediskeys.For(act)
	var g *redis.MapStringStringCmd
	var m *redis.MapStringStringCmd
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		g = p.HGetAll(ctx, k.Group(gid))
		m = p.HGetAll(ctx, k.GroupMembers(gid))
		return nil
	})
	if err != nil {
		return Group{}, fmt.Errorf("%w: group: %w", ErrUnavailable, err)
	}
	f := g.Val()
	if len(f) == 0 {
		return Group{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	out := Group{
		ID: gid, ActivityID: act, Status: GroupStatus(f["status"]), Size: int(num("size")), Members: int(num("members")),
		Paid: int(num("paid")), LeaderID: num("leader"), CreatedAt: time.UnixMilli(num("created_ms")).UTC(),
		ExpiresAt: time.UnixMilli(num("expires_ms")).UTC(), MemberOrders: map[int64]string{},
	}
	for user, no := range m.Val() {
		id, _ := strconv.ParseInt(user, 10, 64)
		out.MemberOrders[id] = no
	}
	return out, nil
}

// Forming returns up to limit of activity id's groups with a free slot,
// soonest deadline first.
func (s *Redis) Forming(ctx context.Context, id int64, limit int64) ([]Group, error) {
	k := rediskeys.For(id)
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: k.Forming(), Start: "(" + now, Stop: "+inf", ByScore: true, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: forming groups: %w", ErrUnavailable, err)
	}
	out := make([]Group, 0, len(ids))
	for _, gid := range ids {
		g, err := s.GetGroup(ctx, gid)
		if errors.Is(err, ErrGroupNotFound) {
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
func (s *Redis) Overdue(ctx context.Context, id int64, olderThan time.Duration, limit int64) ([]string, error) {
	max := strconv.FormatInt(time.Now().Add(-olderThan).UnixMilli(), 10)
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: rediskeys.For(id).Unsettled(), Start: "-inf", Stop: max, ByScore: true, Count: limit}).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: unsettled groups: %w", ErrUnavailable, err)
	}
	return ids, nil
}

// forget drops group gid from the unsettled index (its records are gone).
func (s *Redis) forget(ctx context.Context, gid string) error {
	act, err := ParseNo(gid)
	if err != nil {
		return err
	}
	return s.rdb.ZRem(ctx, rediskeys.For(act).Unsettled(), gid).Err()
}

// settle runs settle_group.lua: it fails group gid if its deadline passed
// before it succeeded, and returns its status, deadline and member orders.
func (s *Redis) settle(ctx context.Context, gid string) (GroupStatus, time.Time, []string, error) {
	act, err := ParseNo(gid)
	if err != nil {
		return "", time.Time{}, nil, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	k := rediskeys.For(act)
	res, err := settleScript.Run(ctx, s.rdb, []string{k.Meta, k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Unsettled()}, gid).StringSlice()
	if err != nil {
		return "", time.Time{}, nil, fmt.Errorf("%w: settle: %w", ErrUnavailable, err)
	}
	if len(res) < 2 || res[0] == "" {
		return "", time.Time{}, nil, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	ms, _ := strconv.ParseInt(res[1], 10, 64)
	return GroupStatus(res[0]), time.UnixMilli(ms).UTC(), res[2:], nil
}
