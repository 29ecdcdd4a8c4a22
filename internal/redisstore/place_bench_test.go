package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkPlaceRun is what one run of place.lua costs Redis by how many
// orders it holds (the pipe merges the concurrent orders of one sale, or
// of one shard of it, into one run): the script's time, its commands
// included (INFO commandstats), per run and per order, with the rate limit
// charged and without. It is why a sale in shards costs more CPU per order
// while its masters are not busy (docs/benchmarks.md, "One hot sale, many
// masters"): `go test -run '^$' -bench PlaceRun ./internal/redisstore/`.
// The items=3 runs are of a sale of three items, each order naming the
// next (docs/benchmarks.md, "Items"), beside the same runs of a sale of
// one item (a sale of one item, its sku in the meta, as load.lua writes it).
func BenchmarkPlaceRun(b *testing.B) {
	srv := testenv.StartRedis(b)
	rdb := srv.Client(b)
	m := flashMeta()
	m["limit"], m["total"], m["sku"] = 1_000_000, 100_000_000, "LOAD-1"
	seed(b, rdb, time.Now().UnixMilli(), sale(m, 100_000_000, nil))
	act3 := rediskeys.For(3)
	m3 := flashMeta().with("limit", 1_000_000, "total", 100_000_000, "items", 3)
	items := fields{}
	for _, sku := range []string{"LOAD-1", "LOAD-2", "LOAD-3"} {
		items["p:"+sku], items["left:"+sku], items["total:"+sku] = 1999, 30_000_000, 30_000_000
	}
	seed(b, rdb, time.Now().UnixMilli(), join(m3.hset(act3.Meta, 0), [][]any{{"SET", act3.Stock, 90_000_000}}, items.hset(act3.Items, 0)))
	ctx := context.Background()
	user := int64(0)
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, v := range []struct {
			limit bool
			items int
		}{{false, 1}, {true, 1}, {true, 3}} {
			name := "calls=" + strconv.Itoa(n) + "/limit=off"
			if v.limit {
				name = "calls=" + strconv.Itoa(n) + "/limit=on"
			}
			a := act
			if v.items > 1 {
				name, a = "calls="+strconv.Itoa(n)+"/items=3/limit=on", act3
			}
			limit := v.limit
			b.Run(name, func(b *testing.B) {
				before, err := testenv.CommandStats(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				for range b.N {
					calls := make([]luascript.Call, n)
					for i := range calls {
						user++
						rate, rateKey := "0", a.Meta
						if limit {
							rate, rateKey = "10", "fs:rl:{user}"
						}
						sku := ""
						if a == act3 {
							sku = "LOAD-" + strconv.Itoa(int(user%3)+1)
						}
						calls[i] = luascript.Call{Keys: []string{rateKey, a.Meta, a.Stock, a.Users, a.Orders, a.Idem, a.Outbox, a.Items, a.ItemUsers, a.Meta, a.Meta},
							Args: []any{rate, user, 1, order.NewNo(a.ID), "", sku, "", "", "", lockNone}}
					}
					for _, c := range placeMerged.RunAll(ctx, rdb, calls) {
						if r, err := c.Slice(); err != nil || len(r) == 0 || r[0] != int64(codeAccepted) {
							b.Fatalf("an order not accepted: %v %v", r, err)
						}
					}
				}
				after, err := testenv.CommandStats(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				usec := float64(after["evalsha"].Usec - before["evalsha"].Usec)
				b.ReportMetric(usec/float64(b.N), "script-µs/run")
				b.ReportMetric(usec/float64(b.N*n), "script-µs/order")
			})
		}
	}
}
