package stock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A mover killed -9 between a transfer's take and its give leaves the
// units in transit: the sale still counts them (nobody is told sold out),
// and Settle gives them to the receiver once, however often it runs.
func TestShards_moverKilledMidTransfer_settledOnce(t *testing.T) {
	if os.Getenv("FLASHSALE_SHARDS_CHILD") != "" {
		t.Skip("a child's own run")
	}
	r := testenv.StartRedis(t)
	sh := ordertest.On(t, r.Client(t), activity.Activity{ID: 130, Type: activity.Seckill, TotalStock: 30, PerUserLimit: 1, Shards: 3})
	ctx, rdb := context.Background(), sh.RDB
	cmd := exec.Command(os.Args[0], "-test.run=^TestShards_childMovesAndDies$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLASHSALE_SHARDS_CHILD=1", "FLASHSALE_SHARDS_ADDR="+r.Addr())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the mover was to die by SIGKILL: %v\n%s", err, out)
	}
	src, dst := rediskeys.ForShard(130, 0, 3), rediskeys.ForShard(130, 2, 3)
	if n := rdb.HLen(ctx, src.Transit).Val(); n != 1 {
		t.Fatalf("%d transfers in transit after the kill, want 1", n)
	}
	if left, _ := rdb.Get(ctx, src.Stock).Int64(); left != 5 {
		t.Fatalf("the donor has %d left, want 5 (10 less 5 taken)", left)
	}
	if left, _ := sh.Stock.Remaining(ctx, 130); left != 30 {
		t.Fatalf("the sale has %d left while 5 are in transit, want 30", left)
	}
	h, err := sh.Stock.Left(ctx, 130)
	if err != nil || h.Sum() != 30 || h.InTransit != 5 {
		t.Fatalf("Left: %+v, %v; want 30 in all, 5 of them on their way", h, err)
	}
	if n, err := sh.Stock.Settle(ctx, 130, time.Hour); err != nil || n != 0 {
		t.Fatalf("Settle of transfers under an hour old: %d, %v; want none touched", n, err)
	}
	for range 2 {
		if _, err := sh.Stock.Settle(ctx, 130, 0); err != nil {
			t.Fatal(err)
		}
	}
	if left, _ := rdb.Get(ctx, dst.Stock).Int64(); left != 15 {
		t.Fatalf("the receiver has %d, want 15 (10 and the 5 given once)", left)
	}
	if n := rdb.HLen(ctx, src.Transit).Val(); n != 0 {
		t.Fatalf("%d transfers still in transit", n)
	}
	// The sale sells all 30, 15 of them to users of shard 2.
	svc := sh.Service(ordertest.NoTasks{})
	if a := ordertest.PlaceAll(t, svc, 130, ordertest.UsersIn(31, 3, func(s int) bool { return s == 2 })); a["ok"] != 30 || a["sold out"] != 1 {
		t.Fatalf("answers %v, want 30 ok and 1 sold out", a)
	}
	ordertest.CheckShards(t, rdb, 130, 3, 30, 1)
}

// TestShards_childMovesAndDies is the mover of the test above: it takes 5
// units from shard 0 for shard 2 and is killed -9 before giving them.
func TestShards_childMovesAndDies(t *testing.T) {
	if os.Getenv("FLASHSALE_SHARDS_CHILD") == "" {
		t.Skip("run by TestShards_moverKilledMidTransfer_settledOnce")
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FLASHSALE_SHARDS_ADDR")})
	k := stock.New(rdb, stock.Config{})
	stock.KillAfterTake(k)
	_, err := k.Transfer(context.Background(), 130, 0, 2, 5)
	t.Fatalf("the transfer returned (%v): the mover was to die", err)
}

// A sale Redis holds from before shards existed (its meta has no
// 'shards') is one shard, and reads as it did.
func TestShards_saleLoadedBeforeShards_isOneShard(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	k := rediskeys.For(7)
	rdb.HSet(ctx, k.Meta, "status", "published", "total", 10, "accepted", 2, "returned", 0)
	rdb.Set(ctx, k.Stock, 8, 0)
	s := stock.New(rdb, stock.Config{})
	if n, err := s.Shards(ctx, 7); err != nil || n != 1 {
		t.Fatalf("shards %d, %v; want 1", n, err)
	}
	live, err := s.Read(ctx, 7)
	if err != nil || live.Total != 10 || live.Remaining != 8 || live.Shards != nil {
		t.Fatalf("read %+v, %v", live, err)
	}
}

// Shares split a sale's units as evenly as they go, the first shards one
// more.
func TestShares(t *testing.T) {
	for _, c := range []struct {
		total int64
		n     int
		want  []int64
	}{{10, 1, []int64{10}}, {10, 3, []int64{4, 3, 3}}, {3, 3, []int64{1, 1, 1}}, {64, 6, []int64{11, 11, 11, 11, 10, 10}}} {
		got := stock.Shares(c.total, c.n)
		if len(got) != len(c.want) {
			t.Fatalf("Shares(%d, %d) = %v", c.total, c.n, got)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("Shares(%d, %d) = %v, want %v", c.total, c.n, got, c.want)
			}
		}
	}
}

// A transfer given to its receiver whose record its mover could not delete
// (it lost Redis between the two) is not units from nowhere: the sale's
// figures, what a dry shard's pull sees (Left) and the invariants checker
// count its units once, in the receiver; the sale sells exactly its units,
// and the reconciler's Settle deletes the record without giving again.
func TestShards_givenTransferStillRecorded_countedOnce(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	sh := ordertest.On(t, rdb, activity.Activity{ID: 160, Type: activity.Seckill, TotalStock: 9, PerUserLimit: 1, Shards: 3})
	ctx := context.Background()
	if n, err := sh.Stock.Transfer(ctx, 160, 0, 1, 2); err != nil || n != 2 {
		t.Fatalf("transfer: %d, %v", n, err)
	}
	// As if its mover had given the units and then lost Redis: the record
	// stands beside the give.
	src, dst := rediskeys.ForShard(160, 0, 3), rediskeys.ForShard(160, 1, 3)
	rdb.HSet(ctx, src.Transit, "t-lost", "1:2:1")
	rdb.SAdd(ctx, dst.Applied, "t-lost")
	if n, err := sh.Stock.Remaining(ctx, 160); err != nil || n != 9 {
		t.Fatalf("remaining %d, %v; want 9 (the given units once)", n, err)
	}
	live, err := sh.Stock.Read(ctx, 160)
	if err != nil || live.Total != 9 || live.Remaining != 9 {
		t.Fatalf("read %+v, %v; want 9 of 9", live, err)
	}
	left, _, err := invariants.Holdings(ctx, rdb, 160)
	if err != nil || left != 9 {
		t.Fatalf("the invariants checker's units left %d, %v; want 9", left, err)
	}
	// Counted from the transit records, Left saw 11: the 2 given, and
	// their record again.
	h, err := sh.Stock.Left(ctx, 160)
	if err != nil || h.Sum() != 9 || h.InTransit != 0 {
		t.Fatalf("Left %+v (sum %d), %v; want 9, none on their way", h, h.Sum(), err)
	}
	// Shard 2's users buy its 3 units and then the rest, pulled from the
	// other shards.
	svc := sh.Service(ordertest.NoTasks{})
	if a := ordertest.PlaceAll(t, svc, 160, ordertest.UsersIn(10, 3, func(s int) bool { return s == 2 })); a["ok"] != 9 || a["sold out"] != 1 {
		t.Fatalf("answers %v, want 9 ok and 1 sold out", a)
	}
	if n, err := sh.Stock.Settle(ctx, 160, 0); err != nil || n != 1 {
		t.Fatalf("settle: %d, %v; want the one record finished", n, err)
	}
	if n := rdb.HLen(ctx, src.Transit).Val(); n != 0 {
		t.Fatalf("%d transfer records left", n)
	}
	ordertest.CheckShards(t, rdb, 160, 3, 9, 1)
}

// A sharded sale whose meta has no sale_total (loaded by a build from
// before it was written, and not published since) cannot be summed:
// Left says so, rather than count the other shards' units as sold (and
// answer sold out while they are left).
func TestShards_noSaleTotal_leftIsAnError(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	sh := ordertest.On(t, rdb, activity.Activity{ID: 180, Type: activity.Seckill, TotalStock: 9, PerUserLimit: 1, Shards: 3})
	ctx := context.Background()
	for s := range 3 {
		rdb.HDel(ctx, rediskeys.ForShard(180, s, 3).Meta, "sale_total")
	}
	if h, err := sh.Stock.Left(ctx, 180); !errors.Is(err, stock.ErrUnavailable) {
		t.Fatalf("Left: %+v, %v; want ErrUnavailable", h, err)
	}
}

// While movers shift units between a sale's shards, every single read of
// the shards (one pass, each shard read apart) adds up to the sale's
// units: a transfer changes no shard's sold count, which is what the sum
// is made of. Counted from stock and transit records, a pass that read a
// donor before a take and its receiver after the give counted the units
// twice (and the other way round, not at all); so did one that read a
// given transfer's record before its delete. On one server a pass's reads
// run back to back; on a cluster they go to three masters at once, and
// movers' steps land between them.
func TestShards_readWhileUnitsMove_everyPassAddsUp(t *testing.T) {
	t.Run("one server", func(t *testing.T) { readWhileUnitsMove(t, testenv.StartRedis(t).Client(t)) })
	t.Run("cluster", func(t *testing.T) { readWhileUnitsMove(t, testenv.StartRedisCluster(t, 3).Client(t)) })
}

func readWhileUnitsMove(t *testing.T, rdb redis.UniversalClient) {
	sh := ordertest.On(t, rdb, activity.Activity{ID: 170, Type: activity.Seckill, TotalStock: 64, PerUserLimit: 1, Shards: 6})
	ctx, end := context.Background(), time.Now().Add(3*time.Second)
	var moved atomic.Int64
	var g errgroup.Group
	for m := range 4 {
		g.Go(func() error {
			for i := 0; time.Now().Before(end); i++ {
				from, to := (m+i)%6, (m+i+1+i%4)%6
				n, err := sh.Stock.Transfer(ctx, 170, from, to, int64(1+i%5))
				if err != nil {
					return err
				}
				moved.Add(n)
			}
			return nil
		})
	}
	reads := 0
	for ; time.Now().Before(end); reads++ {
		h, err := sh.Stock.Left(ctx, 170)
		if err != nil {
			t.Fatal(err)
		}
		if h.Sum() != 64 {
			t.Fatalf("read %d: %+v adds up to %d, want 64", reads, h, h.Sum())
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if moved.Load() < 100 || reads < 100 {
		t.Fatalf("%d units moved over %d reads: too few to have raced", moved.Load(), reads)
	}
	t.Logf("%d units moved in transfers over %d reads", moved.Load(), reads)
	ordertest.CheckShards(t, rdb, 170, 6, 64, 0)
}

// A sharded sale's sell-out is proven from outside: SoldOutNow says so, at
// the sale's version, once a snapshot finds every shard empty — not while
// a unit is left in any shard, not of a sale of one shard (its accept marks
// its own), not of a sale not published.
func TestShards_soldOutNow_everyShardEmpty_atTheSalesVersion(t *testing.T) {
	r := testenv.StartRedis(t)
	sh := ordertest.On(t, r.Client(t),
		activity.Activity{ID: 140, Type: activity.Seckill, TotalStock: 6, PerUserLimit: 1, Shards: 3, Version: 4},
		activity.Activity{ID: 141, Type: activity.Seckill, TotalStock: 1, PerUserLimit: 1, Version: 2})
	ctx := context.Background()
	soldOut := func(id int64) (int64, bool) {
		t.Helper()
		v, ok, err := sh.Stock.SoldOutNow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}
	if _, ok := soldOut(140); ok {
		t.Fatal("sold out before any order")
	}
	svc := sh.Service(ordertest.NoTasks{})
	answers := ordertest.PlaceAll(t, svc, 140, ordertest.UsersIn(5, 3, func(int) bool { return true }))
	if answers["ok"] != 5 {
		t.Fatalf("5 orders of 6 units: %v", answers)
	}
	if _, ok := soldOut(140); ok {
		t.Fatal("sold out with a unit left")
	}
	// The last unit, wherever it is: pulled into the shard of the user who
	// takes it.
	answers = ordertest.PlaceAll(t, svc, 140, ordertest.UsersIn(9, 3, func(int) bool { return true })[5:])
	if answers["ok"] != 1 || answers["sold out"] != 3 {
		t.Fatalf("4 more shoppers for the last unit: %v", answers)
	}
	if v, ok := soldOut(140); !ok || v != 4 {
		t.Fatalf("every shard empty: SoldOutNow %d %v, want version 4", v, ok)
	}
	// A unit given back to one shard: not sold out any more.
	if err := sh.RDB.IncrBy(ctx, rediskeys.ForShard(140, 1, 3).Stock, 1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := soldOut(140); ok {
		t.Fatal("sold out with a unit back in shard 1")
	}
	// A sale of one shard, sold out: its accept marked it; nothing here.
	if answers := ordertest.PlaceAll(t, svc, 141, []int64{1}); answers["ok"] != 1 {
		t.Fatalf("the one-shard sale: %v", answers)
	}
	if _, ok := soldOut(141); ok {
		t.Fatal("SoldOutNow spoke of a sale of one shard")
	}
}
