package order

import (
	"context"
	"errors"
	"fmt"
)

// OpenGroup opens a group of a group buy with the caller's order as its
// first member; the group's deadline is now plus the activity's group ttl.
func (s *Service) OpenGroup(ctx context.Context, r PlaceRequest) (Group, Order, error) {
	r.IdempotencyKey = ""
	if err := r.validate(); err != nil {
		return Group{}, Order{}, err
	}
	unlock, err := s.lockUser(ctx, r.ActivityID, r.UserID)
	if err != nil {
		return Group{}, Order{}, err
	}
	defer unlock()
	gid, no := NewNo(r.ActivityID), NewNo(r.ActivityID)
	o, expires, err := s.store.enterGroup(ctx, openGroupScript, gid, no, r.UserID, r.Quantity)
	if err != nil {
		return Group{}, Order{}, err
	}
	s.queueOrder(ctx, o)
	s.queue(ctx, no, func(ctx context.Context) error { return s.tasks.SettleAt(ctx, gid, expires) })
	s.queue(ctx, no, func(ctx context.Context) error { return s.tasks.SyncGroup(ctx, gid) })
	g, err := s.store.GetGroup(ctx, gid)
	return g, o, err
}

// JoinGroup takes a slot in group gid for userID. Refusals: ErrGroupFull,
// ErrGroupClosed, ErrAlreadyMember, ErrGroupNotFound, and the sale's own.
func (s *Service) JoinGroup(ctx context.Context, gid string, userID int64, qty int) (Order, error) {
	act, err := ParseNo(gid)
	if err != nil {
		return Order{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	r := PlaceRequest{ActivityID: act, UserID: userID, Quantity: qty}
	if err := r.validate(); err != nil {
		return Order{}, err
	}
	unlock, err := s.lockUser(ctx, act, userID)
	if err != nil {
		return Order{}, err
	}
	defer unlock()
	o, _, err := s.store.enterGroup(ctx, joinGroupScript, gid, NewNo(act), userID, qty)
	if err != nil {
		return Order{}, err
	}
	s.queueOrder(ctx, o)
	return o, nil
}

// queueOrder queues a new order's payment timeout and persistence.
func (s *Service) queueOrder(ctx context.Context, o Order) {
	s.queue(ctx, o.No, func(ctx context.Context) error { return s.tasks.Accepted(ctx, o.No, o.PayBy) })
}

// Member is one member of a group as anyone may see it: whether they paid,
// and whether it is the viewer. Other users' ids are not shown.
type Member struct {
	Paid bool
	You  bool
}

// GroupView is a group with its members.
type GroupView struct {
	Group
	List []Member
}

// GetGroup returns group gid as viewerID (0 for anyone) sees it.
func (s *Service) GetGroup(ctx context.Context, gid string, viewerID int64) (GroupView, error) {
	g, err := s.store.GetGroup(ctx, gid)
	if err != nil {
		return GroupView{}, err
	}
	v := GroupView{Group: g}
	for user, no := range g.MemberOrders {
		o, err := s.store.Get(ctx, no)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return GroupView{}, err
		}
		v.List = append(v.List, Member{Paid: o.Status == Paid || o.Status == Refunded, You: user == viewerID})
	}
	return v, nil
}

// FormingGroups lists up to limit of an activity's groups with a free slot,
// soonest deadline first.
func (s *Service) FormingGroups(ctx context.Context, activityID int64, limit int64) ([]Group, error) {
	return s.store.Forming(ctx, activityID, limit)
}

// Settle settles group gid at its deadline: a group that has not succeeded
// fails, its paid members are refunded and its unpaid ones cancelled, all
// their units going back. Each order changes under its own lock and only
// from the state the change needs (paid for a refund), so settling twice, or
// two workers settling at once, refunds each order once. A group whose
// deadline has not come is ErrNotDue.
func (s *Service) Settle(ctx context.Context, gid string) error {
	status, _, members, err := s.store.settle(ctx, gid)
	if err != nil {
		return err
	}
	switch status {
	case Forming:
		return fmt.Errorf("%w: group %s", ErrNotDue, gid)
	case Succeeded:
		return s.tasks.SyncGroup(ctx, gid)
	}
	var errs []error
	for _, no := range members {
		o, err := s.store.Get(ctx, no)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var what string
		switch o.Status {
		case Paid:
			what = "refund"
		case PendingPayment:
			what = "settle"
		default:
			continue // refunded or cancelled already
		}
		if _, err := s.transition(ctx, no, what, 0); err != nil && !errors.Is(err, ErrConflict) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.tasks.SyncGroup(ctx, gid))
	return errors.Join(errs...)
}
