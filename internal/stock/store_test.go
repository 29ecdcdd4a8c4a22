package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func sale(id int64, total, limit int, start, end time.Time) activity.Activity {
	return activity.Activity{
		ID: id, Type: activity.Seckill, Name: "sale", SKU: "S", PriceCents: 100, TotalStock: total,
		PerUserLimit: limit, StartsAt: start, EndsAt: end, PaymentTTL: time.Minute, Status: activity.Published,
	}
}

func running(id int64, total, limit int) activity.Activity {
	return sale(id, total, limit, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

func setup(t *testing.T) (*redis.Client, *stock.Store) {
	t.Helper()
	rdb := testenv.StartRedis(t).Client(t)
	return rdb, stock.New(rdb, stock.Config{})
}

func load(t *testing.T, s *stock.Store, a activity.Activity) {
	t.Helper()
	if _, err := s.Load(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func req(act, user int64, qty int, order string) stock.Request {
	return stock.Request{ActivityID: act, UserID: user, Qty: qty, OrderNo: order}
}

// state is the Redis picture of activity 1 the scripts leave behind.
func state(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	meta := rdb.HMGet(ctx, "fs:{act:1}:meta", "status", "total", "accepted", "returned").Val()
	return fmt.Sprintf("meta=%v stock=%s users=%v reserved=%v", meta,
		rdb.Get(ctx, "fs:{act:1}:stock").Val(), rdb.HGetAll(ctx, "fs:{act:1}:users").Val(),
		rdb.HGetAll(ctx, "fs:{act:1}:reserved").Val())
}

func TestReserve_table(t *testing.T) {
	rdb, s := setup(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		seed   func()
		req    stock.Request
		want   error
		after  string
		remain int64
	}{
		{"reserves", nil, req(1, 7, 2, "o1"), nil,
			"meta=[published 10 1 0] stock=8 users=map[7:2] reserved=map[o1:7|2|r]", 8},
		{"retry of the same order is a duplicate and changes nothing",
			func() { s.Reserve(ctx, req(1, 7, 2, "o1")) }, req(1, 7, 2, "o1"), stock.ErrDuplicate,
			"meta=[published 10 1 0] stock=8 users=map[7:2] reserved=map[o1:7|2|r]", 8},
		{"over the user's limit",
			func() { s.Reserve(ctx, req(1, 7, 2, "o1")) }, req(1, 7, 2, "o2"), activity.ErrLimitExceeded,
			"meta=[published 10 1 0] stock=8 users=map[7:2] reserved=map[o1:7|2|r]", 8},
		{"more than is left",
			func() { rdb.Set(ctx, "fs:{act:1}:stock", 1, 0) }, req(1, 7, 2, "o1"), activity.ErrSoldOut,
			"meta=[published 10 0 0] stock=1 users=map[] reserved=map[]", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb.FlushAll(ctx)
			s := stock.New(rdb, stock.Config{}) // a fresh sold-out flag each case
			load(t, s, running(1, 10, 3))
			if tc.seed != nil {
				tc.seed()
			}
			got, err := s.Reserve(ctx, tc.req)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if got.Remaining != tc.remain {
				t.Fatalf("remaining %d, want %d", got.Remaining, tc.remain)
			}
			if st := state(t, rdb); st != tc.after {
				t.Fatalf("state\n got %s\nwant %s", st, tc.after)
			}
		})
	}
}

func TestReserve_windowEdges_andStatus(t *testing.T) {
	rdb, s := setup(t)
	ctx := context.Background()
	now := time.Now()
	load(t, s, sale(1, 10, 1, now.Add(time.Hour), now.Add(2*time.Hour)))
	load(t, s, sale(2, 10, 1, now.Add(-2*time.Hour), now.Add(-time.Millisecond)))
	closed := running(3, 10, 1)
	closed.Status = activity.Closed
	load(t, s, closed)
	load(t, s, sale(4, 10, 1, now.Add(-time.Millisecond), now.Add(time.Hour)))

	for _, tc := range []struct {
		act  int64
		want error
	}{
		{1, activity.ErrNotStarted},
		{2, activity.ErrEnded},
		{3, activity.ErrEnded},
		{4, nil},                   // started a moment ago
		{5, activity.ErrNotOnSale}, // never published
	} {
		if _, err := s.Reserve(ctx, req(tc.act, 1, 1, "o")); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("activity %d: %v, want %v", tc.act, err, tc.want)
		}
	}
	for _, act := range []int64{1, 2, 3} {
		if v, _ := s.Read(ctx, act); v.Remaining != 10 || v.Accepted != 0 {
			t.Errorf("activity %d: a refusal changed the stock: %+v", act, v)
		}
	}
	if n := rdb.Exists(ctx, "fs:{act:5}:meta", "fs:{act:5}:stock").Val(); n != 0 {
		t.Errorf("a refusal for an unknown activity created %d keys", n)
	}
}

func TestRelease_isIdempotent_neverAboveTotal(t *testing.T) {
	rdb, s := setup(t)
	ctx := context.Background()
	load(t, s, running(1, 10, 5))
	if _, err := s.Reserve(ctx, req(1, 7, 3, "o1")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		got, err := s.Release(ctx, 1, "o1")
		if err != nil || got != want {
			t.Fatalf("release %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if st := state(t, rdb); st != "meta=[published 10 1 1] stock=10 users=map[] reserved=map[o1:7|3|x]" {
		t.Fatalf("after releasing twice: %s", st)
	}
	if got, _ := s.Release(ctx, 1, "never-reserved"); got {
		t.Fatal("released an order that was never reserved")
	}
	// A reservation whose units are somehow already back does not push the stock over.
	s.Reserve(ctx, req(1, 8, 2, "o2"))
	rdb.Set(ctx, "fs:{act:1}:stock", 9, 0)
	s.Release(ctx, 1, "o2")
	if left, _ := rdb.Get(ctx, "fs:{act:1}:stock").Int(); left != 10 {
		t.Fatalf("stock %d after release, want capped at the total 10", left)
	}
	if _, err := s.Reserve(ctx, req(1, 7, 2, "o1")); !errors.Is(err, stock.ErrDuplicate) {
		t.Fatalf("reserving a cancelled order's number again: %v", err)
	}
}

func TestLoad_again_neverResetsStock(t *testing.T) {
	_, s := setup(t)
	ctx := context.Background()
	a := running(1, 10, 5)
	load(t, s, a)
	s.Reserve(ctx, req(1, 7, 4, "o1"))
	a.EndsAt = a.EndsAt.Add(time.Hour)
	if left, err := s.Load(ctx, a); err != nil || left != 6 {
		t.Fatalf("reload: %d, %v; want 6 left", left, err)
	}
	a.Status = activity.Closed
	s.Load(ctx, a)
	if _, err := s.Reserve(ctx, req(1, 8, 1, "o2")); !errors.Is(err, activity.ErrEnded) {
		t.Fatalf("reserve after close: %v", err)
	}
	draft := running(2, 10, 1)
	draft.Status = activity.Draft
	if _, err := s.Load(ctx, draft); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("loading a draft: %v", err)
	}
}

// Units given back after a sale sold out reopen it: in this process at
// once, in another through the restock notice.
func TestSoldOut_flagClearsWhenStockComesBack(t *testing.T) {
	rdb, _ := setup(t)
	soldOutFlagClears(t, rdb, 1)
}

// On a 3-master Redis Cluster the restock notice (PUBLISH, which a cluster
// broadcasts to every node) reaches a watcher whose pattern subscription sits
// on whichever master: sales on every master are tried.
func TestSoldOut_flagClearsWhenStockComesBack_onACluster(t *testing.T) {
	rc := testenv.StartRedisCluster(t, 3).Client(t)
	masters := map[string]bool{}
	for id := int64(1); len(masters) < 3; id++ {
		node, err := rc.MasterForKey(context.Background(), rediskeys.For(id).Meta)
		if err != nil {
			t.Fatal(err)
		}
		if addr := node.Options().Addr; !masters[addr] {
			masters[addr] = true
			soldOutFlagClears(t, rc, id)
		}
	}
}

func soldOutFlagClears(t *testing.T, rdb redis.UniversalClient, id int64) {
	here := stock.New(rdb, stock.Config{})
	there := stock.New(rdb, stock.Config{SoldOutTTL: time.Hour}) // another process; no expiry to lean on
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go there.WatchRestock(ctx, nil)
	load(t, here, running(id, 2, 1))
	here.Reserve(ctx, req(id, 1, 1, "o1"))
	here.Reserve(ctx, req(id, 2, 1, "o2"))
	for _, s := range []*stock.Store{here, there} {
		if _, err := s.Reserve(ctx, req(id, 3, 1, "o3")); !errors.Is(err, activity.ErrSoldOut) {
			t.Fatalf("after selling out: %v", err)
		}
		if !s.SoldOut(id) {
			t.Fatal("sold-out flag not set")
		}
	}
	time.Sleep(50 * time.Millisecond) // the watcher's subscription is up
	if ok, err := here.Release(ctx, id, "o1"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if here.SoldOut(id) {
		t.Fatal("flag still set in the process that released")
	}
	deadline := time.Now().Add(2 * time.Second)
	for there.SoldOut(id) {
		if time.Now().After(deadline) {
			t.Fatalf("activity %d: the other process never heard the restock notice", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := there.Reserve(ctx, req(id, 3, 1, "o3")); err != nil {
		t.Fatalf("buying the returned unit: %v", err)
	}
}

// 2,000 goroutines race for 100 units across 500 users with a limit of 1,
// through each reserver.
func TestReservers_twoThousandBuyers_sellExactlyTheStock(t *testing.T) {
	rdb, s := setup(t)
	lc := lock.New(rdb)
	t.Cleanup(func() { lc.Close() })
	reservers := map[string]stock.Reserver{
		"script":            s,
		"global-mutex-lock": stock.NewLockedReserver(s, stock.WithLocker(lc)),
		"global-fair-lock":  stock.NewLockedReserver(s, stock.WithLocker(lc.Fair())),
	}
	id := int64(0)
	for name, r := range reservers {
		id++
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			load(t, s, running(id, 100, 1))
			var wg sync.WaitGroup
			var mu sync.Mutex
			accepted, byUser := 0, map[int64]int{}
			for g := range 2000 {
				user := int64(g%500 + 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := r.Reserve(ctx, req(id, user, 1, "o"+strconv.Itoa(g)))
					switch {
					case err == nil:
						mu.Lock()
						accepted++
						byUser[user]++
						mu.Unlock()
					case errors.Is(err, activity.ErrSoldOut), errors.Is(err, activity.ErrLimitExceeded):
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if accepted != 100 {
				t.Fatalf("accepted %d, want exactly 100", accepted)
			}
			for u, n := range byUser {
				if n > 1 {
					t.Fatalf("user %d got %d units, limit 1", u, n)
				}
			}
			v, _ := s.Read(ctx, id)
			held := rdb.HGetAll(ctx, fmt.Sprintf("fs:{act:%d}:users", id)).Val()
			if v.Remaining != 0 || v.Accepted != 100 || len(held) != 100 {
				t.Fatalf("Redis: %+v, %d users holding", v, len(held))
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	a := running(1, 10, 1)
	v := stock.View{Known: true, Status: activity.Published, Total: 10, Remaining: 7}
	if r := stock.Reconcile(a, v, 3); !r.InSync || r.SoldUnits != 3 {
		t.Fatalf("in sync: %+v", r)
	}
	if r := stock.Reconcile(a, v, 2); r.InSync || len(r.Problems) != 1 {
		t.Fatalf("one order not persisted yet: %+v", r)
	}
	v.Status = activity.Closed
	if r := stock.Reconcile(a, v, -1); r.InSync {
		t.Fatalf("status mismatch unnoticed: %+v", r)
	}
	if r := stock.Reconcile(a, stock.View{}, -1); r.InSync {
		t.Fatalf("published but missing in Redis unnoticed: %+v", r)
	}
}
