package order_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/redisstore"
)

// takenOnce is the store, but its first OpenGroup or JoinGroup is handed a
// group id or an order number already in use (another user's), in place of
// the one the service drew: the real script finds it taken (code 13) and
// the store says order.ErrNumberTaken. The one-in-2^80 collision, made.
type takenOnce struct {
	order.Store
	gid, no string   // the taken ones to hand over on the first call ("": the drawn one)
	tries   []string // every call's "group id order no", as the service drew them
}

func (s *takenOnce) swap(gid, no string) (string, string) {
	s.tries = append(s.tries, gid+" "+no)
	if len(s.tries) == 1 {
		if s.gid != "" {
			gid = s.gid
		}
		if s.no != "" {
			no = s.no
		}
	}
	return gid, no
}

func (s *takenOnce) OpenGroup(ctx context.Context, gid, no string, r order.PlaceRequest) (order.Accepted, error) {
	gid, no = s.swap(gid, no)
	return s.Store.OpenGroup(ctx, gid, no, r)
}

func (s *takenOnce) JoinGroup(ctx context.Context, gid, no string, r order.PlaceRequest) (order.Accepted, error) {
	_, no = s.swap(gid, no)
	return s.Store.JoinGroup(ctx, gid, no, r)
}

// Opening or joining a group never writes over another group or order: a
// group id or order number found taken is drawn again (retryTaken), and
// the group and order that held it stay as they were.
func TestService_openAndJoinGroup_numberTaken_drawsAnother(t *testing.T) {
	const act = 36
	sh := ordertest.New(t, activity.Activity{ID: act, Type: activity.GroupBuy, TotalStock: 100, PerUserLimit: 1,
		GroupSize: 3, GroupTTL: time.Minute})
	ctx := context.Background()
	// The other user's group and order, whose numbers the first draw hits.
	otherG, otherO, err := sh.Service(ordertest.NoTasks{}).OpenGroup(ctx, order.PlaceRequest{ActivityID: act, UserID: 99, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name    string
		join    bool
		gid, no string
	}{
		{name: "open, the group id taken", gid: otherG.ID},
		{name: "open, the order number taken", no: otherO.No},
		{name: "join, the order number taken", join: true, no: otherO.No},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &takenOnce{Store: sh.Store, gid: tc.gid, no: tc.no}
			svc := order.NewService(order.Deps{Store: store, Locks: sh.Deps(nil).Locks, Tasks: ordertest.NoTasks{},
				Log: ordertest.Log()}, order.Config{})
			r := order.PlaceRequest{ActivityID: act, UserID: int64(1 + i), Quantity: 1}
			var gid string
			var o order.Order
			if tc.join {
				gid = otherG.ID
				o, err = svc.JoinGroup(ctx, gid, r)
			} else {
				var g order.Group
				g, o, err = svc.OpenGroup(ctx, r)
				gid = g.ID
			}
			if err != nil || len(store.tries) != 2 || store.tries[0] == store.tries[1] {
				t.Fatalf("%+v, %v after drawing %q; want a second, different draw accepted", o, err, store.tries)
			}
			if o.No == otherO.No || o.UserID != r.UserID || o.GroupID != gid || (!tc.join && gid == otherG.ID) {
				t.Fatalf("order %s of user %d in group %s; want a new order of user %d in a new group (not %s / %s)",
					o.No, o.UserID, o.GroupID, r.UserID, otherG.ID, otherO.No)
			}
			// The other user's order and group are untouched.
			if got, err := sh.Store.Get(ctx, otherO.No); err != nil || got.UserID != 99 || got.GroupID != otherG.ID || got.Status != order.PendingPayment {
				t.Fatalf("the other user's order is now %+v, %v", got, err)
			}
			g, err := sh.Store.GetGroup(ctx, gid)
			if err != nil || g.MemberOrders[r.UserID] != o.No {
				t.Fatalf("group %s: %+v, %v; want user %d a member with order %s", gid, g, err, r.UserID, o.No)
			}
		})
	}
	// The other group: its leader, and the one joiner.
	g, err := sh.Store.GetGroup(ctx, otherG.ID)
	if err != nil || g.LeaderID != 99 || g.Members != 2 || g.MemberOrders[99] != otherO.No {
		t.Fatalf("the other user's group is now %+v, %v; want leader 99 with order %s and one joiner", g, err, otherO.No)
	}
	if v, _ := sh.Stock.Read(ctx, act); v.Remaining != 100-4 || v.GroupsOpened != 3 {
		t.Fatalf("%d left, %d groups opened; want 96 and 3: every taken draw took nothing", v.Remaining, v.GroupsOpened)
	}
}

// sometimesTaken is the store, but the first Accept finds its
// number taken: the one-in-2^80 collision, injected.
type sometimesTaken struct {
	order.Store
	tries []string
}

func (s *sometimesTaken) Accept(ctx context.Context, no string, r order.PlaceRequest, t order.UserTurn) (order.Accepted, error) {
	s.tries = append(s.tries, no)
	if len(s.tries) == 1 {
		return order.Accepted{}, order.ErrNumberTaken
	}
	return s.Store.Accept(ctx, no, r, t)
}

// A new order never writes over another: a number found taken is drawn
// again; the order numbers carry 80 random bits.
func TestService_place_numberTaken_drawsAnother(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 32, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	store := &sometimesTaken{Store: sh.Store}
	svc := order.NewService(order.Deps{Store: store, Locks: redisstore.Locks{Locker: sh.Locks}, Tasks: ordertest.NoTasks{},
		Log: ordertest.Log()}, order.Config{})
	o, err := svc.Place(context.Background(), order.PlaceRequest{ActivityID: 32, UserID: 1, Quantity: 1})
	if err != nil || len(store.tries) != 2 || o.No != store.tries[1] || store.tries[0] == store.tries[1] {
		t.Fatalf("placed %+v, %v after drawing %v; want the second of two different numbers", o, err, store.tries)
	}
	if _, rest, _ := strings.Cut(o.No, "-"); len(rest) != 26 {
		t.Fatalf("order number %s: want 26 characters (48 bits of time, 80 random bits) after the dash", o.No)
	}
	if id, err := order.ParseNo("32-0CF3YH0AB7J8Q2RS"); err != nil || id != 32 {
		t.Fatalf("a number of the old 16-character form: %d, %v; want it still read", id, err)
	}
}
