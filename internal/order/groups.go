package order

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
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
	Members    int // current members (an unpaid member that left frees its place)
	Paid       int
	LeaderID   int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	// MemberOrders maps each member (user id) to its order number.
	MemberOrders map[int64]string
	// Item is the SKU of the item the group buys (its members' orders'),
	// "" for a group of a sale's one item opened before items.
	Item string
	// EndedAt is when it succeeded or failed (Redis's succeeded_ms,
	// failed_ms); zero while forming.
	EndedAt time.Time
}

// OpenGroup opens a group of a group buy with the caller's order as its
// first member; the group's deadline is now plus the activity's group ttl.
// A request repeating an Idempotency-Key gets the group and order the first
// one opened, as Place does.
func (s *Service) OpenGroup(ctx context.Context, r PlaceRequest) (Group, Order, error) {
	if err := r.Validate(); err != nil {
		return Group{}, Order{}, err
	}
	held, err := s.lockUser(ctx, r.ActivityID, r.UserID)
	if err != nil {
		return Group{}, Order{}, err
	}
	defer release(ctx, held)
	acc, err := retryTaken(func() (Accepted, error) {
		return s.deps.Store.OpenGroup(ctx, NewNo(r.ActivityID), NewNo(r.ActivityID), r)
	})
	if err != nil {
		return Group{}, Order{}, err
	}
	o, gid := acc.Order, acc.Order.GroupID
	if !acc.Replay {
		s.queueOrder(ctx, o)
		s.queueGroup(ctx, o.No, gid, acc.Deadline)
	}
	g, err := s.deps.Store.GetGroup(ctx, gid)
	if acc.Replay && err == nil {
		// The first attempt may have opened the group and failed before
		// queueing its tasks (answered 503 when the replicas did not
		// confirm in time, or its api died), and nothing else records a
		// group in MySQL before its first pay or its settlement (the order
		// itself the reconciler finds on the outbox). Queueing them again
		// is harmless: one settlement per group (its TaskID), and a group
		// sync writes whatever the group is.
		s.queueGroup(ctx, o.No, gid, g.ExpiresAt)
	}
	return g, o, err
}

// queueGroup queues a new group's settlement at its deadline and its
// recording in MySQL.
func (s *Service) queueGroup(ctx context.Context, no, gid string, deadline time.Time) {
	s.queue(ctx, no, func(ctx context.Context) error { return s.deps.Tasks.SettleAt(ctx, gid, deadline) })
	s.queue(ctx, no, func(ctx context.Context) error { return s.deps.Tasks.SyncGroup(ctx, gid) })
}

// JoinGroup takes a place in group gid for r.UserID (r.ActivityID is read
// from gid). Refusals: ErrGroupFull, ErrGroupClosed, ErrAlreadyMember,
// ErrGroupNotFound, and the sale's own. A request repeating an
// Idempotency-Key gets the order the first one made.
func (s *Service) JoinGroup(ctx context.Context, gid string, r PlaceRequest) (Order, error) {
	act, err := ParseNo(gid)
	if err != nil {
		return Order{}, fmt.Errorf("%w: %s", ErrGroupNotFound, gid)
	}
	r.ActivityID = act
	if err := r.Validate(); err != nil {
		return Order{}, err
	}
	held, err := s.lockUser(ctx, act, r.UserID)
	if err != nil {
		return Order{}, err
	}
	defer release(ctx, held)
	acc, err := retryTaken(func() (Accepted, error) { return s.deps.Store.JoinGroup(ctx, gid, NewNo(act), r) })
	if err != nil {
		return Order{}, err
	}
	if !acc.Replay {
		s.queueOrder(ctx, acc.Order)
	}
	return acc.Order, nil
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

// GetGroup returns group gid as viewerID (0 for anyone) sees it. Its
// members come in a stable order: the opener (the leader) first, then by
// when their orders were accepted (CreatedAt, Redis's clock at the join:
// the group records no join order), then by order number.
func (s *Service) GetGroup(ctx context.Context, gid string, viewerID int64) (GroupView, error) {
	g, err := s.deps.Store.GetGroup(ctx, gid)
	if err != nil {
		return GroupView{}, err
	}
	type joined struct {
		user int64
		no   string
		o    Order
	}
	ms := make([]joined, 0, len(g.MemberOrders))
	for user, no := range g.MemberOrders {
		o, err := s.deps.Store.Get(ctx, no)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return GroupView{}, err
		}
		ms = append(ms, joined{user, no, o})
	}
	rank := func(m joined) int { // the leader first
		if m.user == g.LeaderID {
			return 0
		}
		return 1
	}
	slices.SortFunc(ms, func(a, b joined) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), a.o.CreatedAt.Compare(b.o.CreatedAt), strings.Compare(a.no, b.no))
	})
	v := GroupView{Group: g}
	for _, m := range ms {
		v.List = append(v.List, Member{Paid: m.o.Status == Paid || m.o.Status == Refunded, You: m.user == viewerID})
	}
	return v, nil
}

// MaxFormingList bounds FormingGroups.
const MaxFormingList = 50

// FormingGroups lists up to MaxFormingList of an activity's groups with a
// free place, soonest deadline first.
func (s *Service) FormingGroups(ctx context.Context, activityID int64) ([]Group, error) {
	return s.deps.Store.Forming(ctx, activityID, MaxFormingList)
}

// Settle settles group gid at its deadline: a group that has not succeeded
// fails, its paid members are refunded and its unpaid ones cancelled, all
// their units going back. Each order changes under its own lock and only
// from the state the change needs (paid for a refund), so settling twice, or
// two workers settling at once, refunds each order once. A group whose
// deadline has not come is ErrNotDue.
func (s *Service) Settle(ctx context.Context, gid string) error {
	status, members, err := s.deps.Store.FailIfDue(ctx, gid)
	if err != nil {
		return err
	}
	switch status {
	case Forming:
		return fmt.Errorf("%w: group %s", ErrNotDue, gid)
	case Succeeded:
		return s.deps.Tasks.SyncGroup(ctx, gid)
	}
	var errs []error
	for _, no := range members {
		o, err := s.deps.Store.Get(ctx, no)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var a Action
		switch o.Status {
		case Paid:
			a = Refund
		case PendingPayment:
			a = SettleUnpaid
		case Refunded:
			// Refunded before, perhaps by a try of this settlement whose
			// answer was lost (the write landed, the replicas' WAIT timed
			// out), which then never asked for the money back: asked
			// again — once per payment, whatever the repeats.
			s.tellPayments(ctx, no, Refund)
			continue
		default:
			continue // cancelled already
		}
		// ErrConflict: moved on meanwhile (refunded, cancelled): done.
		// Anything else, ErrStale included, is retried with the settlement.
		if _, err := s.transition(ctx, o, a, 0, ""); err != nil && !errors.Is(err, ErrConflict) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.deps.Tasks.SyncGroup(ctx, gid))
	return errors.Join(errs...)
}
