package stock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
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
	if err != nil || h.Sum() != 30 {
		t.Fatalf("Left: %+v, %v; want 30 in all", h, err)
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
