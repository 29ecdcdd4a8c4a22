// Command placeab weighs two versions of the order path's script, place.lua
// as Redis runs it (docs/scripts/redisstore/place.lua, or `git show
// REV:docs/scripts/redisstore/place.lua`), against each other on one
// redis-server of its own: batches of fresh shoppers' orders (the lock
// elided, the rate limit charged, one unit each, as at a launch), the two
// versions taking turns every few batches on the same sale, so that both
// meet the same hash sizes and the same machine. Each version's EVALSHA
// time per order comes from INFO commandstats over its turns.
//
// Whoever goes second in a turn was measured 0.3–0.7 µs an order
// cheaper on this machine with the same script on both sides (the Lua
// collector's debt crosses the turns), so each comparison is run twice,
// the order swapped, and the difference is the mean of the two:
//
//	git show HEAD:docs/scripts/redisstore/place.lua > /tmp/before.lua
//	cd bench && go run ./placeab -a /tmp/before.lua -b ../docs/scripts/redisstore/place.lua
//
// The end-to-end figures stay the launch's (bench/strategy -launch): this
// only resolves a script's change smaller than a launch run's noise.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
)

func main() {
	a := flag.String("a", "", "a version of place.lua as Redis runs it (docs/scripts/redisstore/place.lua)")
	b := flag.String("b", "", "the other version")
	rounds := flag.Int("rounds", 20, "turns of each version, per order of the two")
	per := flag.Int("per", 25, "batches per turn")
	n := flag.Int("n", 32, "orders per batch (the pipe's batches at a launch hold 25–32)")
	flag.Parse()
	if *a == "" || *b == "" {
		log.Fatal("placeab: -a and -b name the two scripts")
	}
	ctx := context.Background()
	var srcs [2]string
	for i, f := range []string{*a, *b} {
		src, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		srcs[i] = string(src)
	}
	dir, err := os.MkdirTemp("", "placeab")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	addr, err := loadtest.FreeAddr()
	if err != nil {
		log.Fatal(err)
	}
	_, port, _ := strings.Cut(addr, ":")
	srv, err := loadtest.StartProc(dir, "redis", addr, "redis-server",
		[]string{"--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no", "--dir", dir}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(5 * time.Second)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for ctx.Err() == nil && rdb.Ping(ctx).Err() != nil {
		time.Sleep(20 * time.Millisecond)
	}

	var diffs []float64
	for pass, order := range [][2]int{{0, 1}, {1, 0}} {
		us, err := compare(ctx, rdb, srcs, order, *rounds, *per, *n)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("pass %d (%s first): a %.2f µs an order, b %.2f (b − a %+.2f)\n", pass+1,
			map[int]string{0: "a", 1: "b"}[order[0]], us[0], us[1], us[1]-us[0])
		diffs = append(diffs, us[1]-us[0])
	}
	fmt.Printf("b − a, the mean of the two passes: %+.2f µs an order (%d orders of each per pass)\n",
		(diffs[0]+diffs[1])/2, *rounds**per**n)
}

// compare runs the two scripts in turns on a new sale, order[0]'s first
// in each round, and returns each one's EVALSHA µs an order.
func compare(ctx context.Context, rdb *redis.Client, srcs [2]string, order [2]int, rounds, per, n int) ([2]float64, error) {
	var out [2]float64
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return out, err
	}
	now := time.Now().UnixMilli()
	meta := "fs:{act:1}:meta"
	if err := rdb.HSet(ctx, meta, "status", "published", "starts_ms", now-3_600_000, "ends_ms", now+3_600_000, "limit", 1,
		"total", 100_000_000, "price", 1999, "pay_ttl_ms", 900_000, "type", "seckill", "accepted", 0, "returned", 0).Err(); err != nil {
		return out, err
	}
	if err := rdb.Set(ctx, "fs:{act:1}:stock", 100_000_000, 0).Err(); err != nil {
		return out, err
	}
	// place.lua's keys (its header): the rate limit's base, the sale's
	// eight, the user lock table's two.
	keys := []string{"fs:rl:{user}", meta, "fs:{act:1}:stock", "fs:{act:1}:users", "fs:{act:1}:orders", "fs:{act:1}:idem",
		"fs:{act:1}:outbox", "fs:{act:1}:items", "fs:{act:1}:itemusers", "fs:lock:{act:1}:users", "fs:lock:{act:1}:users"}
	var shas [2]string
	for i, src := range srcs {
		sha, err := rdb.ScriptLoad(ctx, src).Result()
		if err != nil {
			return out, err
		}
		shas[i] = sha
	}
	var usec, orders [2]int64
	user, no := int64(0), int64(1_000_000_000)
	for range rounds {
		for _, v := range order {
			u0, err := evalshaUsec(ctx, rdb)
			if err != nil {
				return out, err
			}
			for range per {
				// luascript.Merged's frame: n, each call's counts (the
				// first names the keys, the others -1: "call 1's"), then
				// the calls' arguments.
				args := []any{n}
				for i := range n {
					if i == 0 {
						args = append(args, len(keys), 10)
					} else {
						args = append(args, -1, 10)
					}
				}
				for range n {
					user++
					no++
					args = append(args, "10", user, 1, "1"+strconv.FormatInt(no, 10)+"0001", "", "",
						strconv.FormatInt(user, 10), "", "", "elide")
				}
				res, err := rdb.EvalSha(ctx, shas[v], keys, args...).Slice()
				if err != nil {
					return out, err
				}
				for _, r := range res {
					if rr, ok := r.([]any); !ok || rr[0] != int64(0) {
						return out, fmt.Errorf("an order not accepted: %v", r)
					}
				}
			}
			u1, err := evalshaUsec(ctx, rdb)
			if err != nil {
				return out, err
			}
			usec[v] += u1 - u0
			orders[v] += int64(per * n)
		}
	}
	for v := range 2 {
		out[v] = float64(usec[v]) / float64(orders[v])
	}
	return out, nil
}

// evalshaUsec is the µs Redis has spent in EVALSHA so far.
func evalshaUsec(ctx context.Context, rdb *redis.Client) (int64, error) {
	stats, err := loadtest.RedisCommandStats(ctx, rdb)
	if err != nil {
		return 0, err
	}
	return stats["evalsha"].Usec, nil
}
