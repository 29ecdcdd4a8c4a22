package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
)

// BenchmarkPlaceRun is what one run of place.lua costs Redis by how many
// orders it holds (the pipe merges the concurrent orders of one sale, or
// of one shard of it, into one run): the script's time, its commands
// included (INFO commandstats), per run and per order, with the rate limit
// charged and without. It is why a sale in shards costs more CPU per order
// while its masters are not busy (docs/benchmarks.md, "One hot sale, many
// masters"): `go test -run '^$' -bench PlaceRun ./internal/redisstore/`.
func BenchmarkPlaceRun(b *testing.B) {
	srv := testenv.StartRedis(b)
	rdb := srv.Client(b)
	m := flashMeta()
	m["limit"], m["total"] = 1_000_000, 100_000_000
	seed(b, rdb, time.Now().UnixMilli(), sale(m, 100_000_000, nil))
	ctx := context.Background()
	user := int64(0)
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, limit := range []bool{false, true} {
			name := "calls=" + strconv.Itoa(n) + "/limit=off"
			if limit {
				name = "calls=" + strconv.Itoa(n) + "/limit=on"
			}
			b.Run(name, func(b *testing.B) {
				before, err := testenv.CommandStats(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				for range b.N {
					calls := make([]luascript.Call, n)
					for i := range calls {
						user++
						rate, rateKey := "0", act.Meta
						if limit {
							rate, rateKey = "10", "fs:rl:{user}"
						}
						calls[i] = luascript.Call{Keys: []string{rateKey, act.Meta, act.Stock, act.Users, act.Orders, act.Idem, act.Outbox, act.Meta, act.Meta},
							Args: []any{rate, user, 1, order.NewNo(1), "", "", "", "", lockNone}}
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
