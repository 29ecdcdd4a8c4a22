package order_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A sale of N units in 3 shards, N users each wanting one unit, all at
// once (2,000 goroutines): every one of them gets a unit, however the users
// fall into shards — spread as they come, all in one shard, or nearly all
// in the shard with the fewest units. Nobody is told sold out while a unit
// is left anywhere; the next user is.
func TestShards_asManyUsersAsUnits_everyOneGetsAUnit_howeverTheyFallIntoShards(t *testing.T) {
	const n, shards = 2000, 3
	cases := []struct {
		name string
		pick func(i int, shard int) bool
	}{
		{"spread as they come", func(int, int) bool { return true }},
		{"all in shard 1", func(_ int, s int) bool { return s == 1 }},
		{"nearly all in shard 2, the smallest", func(i int, s int) bool { return s == 2 || i%50 == 0 }},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			act := int64(100 + ci)
			sh := ordertest.New(t, activity.Activity{ID: act, Type: activity.Seckill, TotalStock: n, PerUserLimit: 1, Shards: shards})
			svc := sh.Service(ordertest.NoTasks{})
			i := 0
			users := ordertest.UsersIn(n, shards, func(s int) bool { i++; return c.pick(i, s) })
			answers := ordertest.PlaceAll(t, svc, act, users)
			if answers["ok"] != n {
				t.Fatalf("answers %v: want all %d ok", answers, n)
			}
			if sold := ordertest.CheckShards(t, sh.RDB, act, shards, n, 1); sold != n {
				t.Fatalf("%d units sold, want %d", sold, n)
			}
			_, err := svc.Place(context.Background(), order.PlaceRequest{ActivityID: act, UserID: 1_000_000, Quantity: 1})
			if !errors.Is(err, activity.ErrSoldOut) {
				t.Fatalf("an order after the last unit: %v, want sold out", err)
			}
		})
	}
}

// More users than units, adversarially spread, from several OS processes
// (each with its own stock.Keeper: their pulls contend in Redis, not in
// one process's singleflight): exactly N units sold, never more, no user
// over the limit, and every other answer sold out.
func TestShards_moreUsersThanUnits_severalProcesses_exactlyNSold(t *testing.T) {
	if os.Getenv("FLASHSALE_SHARDS_CHILD") != "" {
		t.Skip("a child's own run")
	}
	const units, shards, procs, perProc = 600, 6, 3, 400
	r := testenv.StartRedis(t)
	sh := ordertest.On(t, r.Client(t), activity.Activity{ID: 120, Type: activity.Seckill, TotalStock: units, PerUserLimit: 2, Shards: shards})
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestShards_childPlaces$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FLASHSALE_SHARDS_CHILD=1", "FLASHSALE_SHARDS_ADDR="+r.Addr(),
			"FLASHSALE_SHARDS_FROM="+strconv.Itoa(p*perProc), "FLASHSALE_SHARDS_N="+strconv.Itoa(perProc))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	ok, soldOut := 0, 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		var a, b int
		if _, err := fmt.Sscanf(outs[i].String()[strings.Index(outs[i].String(), "answers"):], "answers ok=%d soldout=%d", &a, &b); err != nil {
			t.Fatalf("child %d said: %s", i, outs[i])
		}
		ok, soldOut = ok+a, soldOut+b
	}
	if ok+soldOut != 2*procs*perProc {
		t.Fatalf("%d ok and %d sold out of %d orders", ok, soldOut, 2*procs*perProc)
	}
	if sold := ordertest.CheckShards(t, sh.RDB, 120, shards, units, 2); sold != units || int64(ok) != units {
		t.Fatalf("%d units sold, %d orders accepted, want %d", sold, ok, units)
	}
}

// TestShards_childPlaces is a child process of the test above: it places
// its users' orders (two units' worth each, one at a time, 80% of them in
// shard 0) and prints its answers.
func TestShards_childPlaces(t *testing.T) {
	if os.Getenv("FLASHSALE_SHARDS_CHILD") == "" {
		t.Skip("run by TestShards_moreUsersThanUnits_severalProcesses_exactlyNSold")
	}
	from, _ := strconv.Atoi(os.Getenv("FLASHSALE_SHARDS_FROM"))
	n, _ := strconv.Atoi(os.Getenv("FLASHSALE_SHARDS_N"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FLASHSALE_SHARDS_ADDR"), PoolSize: 64})
	sh := ordertest.On(t, rdb)
	svc := sh.Service(ordertest.NoTasks{})
	i := 0
	all := ordertest.UsersIn(from+n, 6, func(s int) bool { i++; return s == 0 || i%5 == 0 })
	users := all[from:]
	// Each user orders twice (the limit): 2 x n orders.
	answers := ordertest.PlaceAll(t, svc, 120, append(users, users...))
	fmt.Printf("answers ok=%d soldout=%d\n", answers["ok"], answers["sold out"])
	if answers["ok"]+answers["sold out"] != 2*n {
		t.Fatalf("answers %v", answers)
	}
}

// A cancelled order's unit goes back to its own shard, and a user of
// another shard, whose shard is empty, buys it.
func TestShards_returnedUnit_backToItsShard_soldAgainToAnotherShard(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 140, Type: activity.Seckill, TotalStock: 3, PerUserLimit: 1, Shards: 3})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	users := ordertest.UsersIn(3, 3, func(s int) bool { return s == 1 })
	var first order.Order
	for i, u := range users {
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 140, UserID: u, Quantity: 1})
		if err != nil {
			t.Fatalf("order %d: %v", i, err)
		}
		if _, s, _, _ := order.ParseNoShard(o.No); s != 1 {
			t.Fatalf("order %s is not in shard 1", o.No)
		}
		if i == 0 {
			first = o
		}
	}
	other := ordertest.UsersIn(1, 3, func(s int) bool { return s == 0 })[0]
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 140, UserID: other, Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("an order of a sold-out sale: %v", err)
	}
	got, err := svc.Get(ctx, first.No, first.UserID)
	if err != nil || got.No != first.No {
		t.Fatalf("reading %s back from its shard: %+v, %v", first.No, got, err)
	}
	if _, err := svc.Cancel(ctx, first.No, first.UserID); err != nil {
		t.Fatal(err)
	}
	if left, _ := sh.RDB.Get(ctx, rediskeys.ForShard(140, 1, 3).Stock).Int64(); left != 1 {
		t.Fatalf("shard 1 has %d left after the cancel, want 1", left)
	}
	// The local sold-out flag clears with the restock notice (no process
	// here watches for it), or after its ttl, 1 s.
	time.Sleep(1100 * time.Millisecond)
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 140, UserID: other, Quantity: 1})
	if err != nil {
		t.Fatalf("the returned unit was not sold to a user of shard 0: %v", err)
	}
	if _, s, _, _ := order.ParseNoShard(o.No); s != 0 {
		t.Fatalf("order %s is not in shard 0", o.No)
	}
	ordertest.CheckShards(t, sh.RDB, 140, 3, 3, 1)
}

// An order of two units whose shard holds one, while another shard holds
// the other: the unit is pulled over and the order accepted. The last
// unit, in the user's own shard, is too few for two: refused as sold out
// (not enough left), and the sale is not flagged sold out (one is left).
func TestShards_unitsScatteredOverShards_pulledTogetherForOneOrder(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 150, Type: activity.Seckill, TotalStock: 3, PerUserLimit: 2, Shards: 3})
	ctx, rdb := context.Background(), sh.RDB
	svc := sh.Service(ordertest.NoTasks{})
	u := ordertest.UsersIn(1, 3, func(s int) bool { return s == 1 })[0]
	o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 150, UserID: u, Quantity: 2})
	if err != nil || o.Quantity != 2 {
		t.Fatalf("two units over two shards: %+v, %v", o, err)
	}
	v := ordertest.UsersIn(1, 3, func(s int) bool { return s == 2 })[0]
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 150, UserID: v, Quantity: 2}); !errors.Is(err, activity.ErrSoldOut) {
		t.Fatalf("two units when one is left: %v, want refused (sold out)", err)
	}
	if svc.RefusedHere(150, "") {
		t.Fatal("the sale is flagged sold out with a unit left")
	}
	if n, _ := sh.Stock.Remaining(ctx, 150); n != 1 {
		t.Fatalf("%d left, want 1", n)
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 150, UserID: v, Quantity: 1}); err != nil {
		t.Fatalf("the last unit: %v", err)
	}
	live, err := sh.Stock.Read(ctx, 150)
	if err != nil || live.Total != 3 || live.Remaining != 0 || live.Accepted != 2 || len(live.Shards) != 3 {
		t.Fatalf("the sale's figures: %+v, %v; want 3 total, 0 left, 2 accepted, 3 shards", live, err)
	}
	checkTotal := int64(0)
	for _, s := range live.Shards {
		checkTotal += s.Total
	}
	if checkTotal != 3 {
		t.Fatalf("the shards' totals sum to %d", checkTotal)
	}
	ordertest.CheckShards(t, rdb, 150, 3, 3, 2)
}

// A pull judged by each caller's own want: the sale's last unit is in
// the shard of two shoppers, one wanting two units (refused: not enough,
// with the unit left, so no sold-out flag) and one wanting one (sold it).
func TestShards_lastUnitInTheShoppersShard_oneWantingTwoRefused_oneWantingOneServed(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 170, Type: activity.Seckill, TotalStock: 3, PerUserLimit: 2, Shards: 3})
	ctx := context.Background()
	svc := sh.Service(ordertest.NoTasks{})
	us := ordertest.UsersIn(4, 3, func(s int) bool { return s == 0 })
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 170, UserID: us[0], Quantity: 2}); err != nil {
		t.Fatalf("two of three units: %v", err)
	}
	// The unit left is in another shard: a pull for one brings it over.
	if more, _, err := sh.Stock.Pull(ctx, 170, 0, 1); err != nil || !more {
		t.Fatalf("a pull for one: more %v, %v; want true", more, err)
	}
	if more, left, err := sh.Stock.Pull(ctx, 170, 0, 2); err != nil || more || left != 1 {
		t.Fatalf("a pull for two with one left: more %v, left %d, %v; want false, 1", more, left, err)
	}
	if more, _, err := sh.Stock.Pull(ctx, 170, 0, 1); err != nil || !more {
		t.Fatalf("a pull for one with one left in the shard: more %v, %v; want true", more, err)
	}
	_, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 170, UserID: us[1], Quantity: 2})
	if !errors.Is(err, activity.ErrSoldOut) || svc.RefusedHere(170, "") {
		t.Fatalf("two units with one left: %v, flagged sold out %v; want refused, not flagged", err, svc.RefusedHere(170, ""))
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 170, UserID: us[2], Quantity: 1}); err != nil {
		t.Fatalf("the last unit: %v", err)
	}
	if _, err := svc.Place(ctx, order.PlaceRequest{ActivityID: 170, UserID: us[3], Quantity: 1}); !errors.Is(err, activity.ErrSoldOut) || !svc.RefusedHere(170, "") {
		t.Fatalf("after the last unit: %v, flagged %v; want sold out, flagged", err, svc.RefusedHere(170, ""))
	}
}
