package luascript_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What sending a batch's shared keys once saves Redis, side by side in one
// run: each b.N runs the same 32 calls (the order path's elided accept:
// its 8 keys, the rate limit's base, the sale's six and the lock table,
// all the same for calls of one sale, and its 9 arguments) 10 times with
// the keys shared ("shared", pack) and 10 times with every call sending
// them ("each", the way before), alternating, so the machine's drift hits
// both alike. The metrics are redis-server's main-thread CPU (INFO cpu)
// per call. The body only answers each call, so the difference is the
// keys' parsing and Lua strings alone:
//
//	go test -run '^$' -bench Merged_sharedKeys -benchtime 200x ./internal/luascript/
func BenchmarkMerged_sharedKeys_redisCPU(b *testing.B) {
	rdb := testenv.StartRedis(b).Client(b)
	ctx := context.Background()
	m := luascript.NewMerged("local o = {} for i = 1, calls.n do o[i] = {1, 0} end return o")
	const n, runs = 32, 10
	calls := make([]luascript.Call, n)
	for i := range calls {
		user := fmt.Sprint(100000 + i)
		calls[i] = luascript.Call{
			Keys: []string{"fs:rl:{user}", "fs:{act:1}:meta", "fs:{act:1}:stock", "fs:{act:1}:users", "fs:{act:1}:orders", "fs:{act:1}:idem", "fs:{act:1}:outbox", "fs:{act:1}:ul"},
			Args: []any{user, 10, user, 1, fmt.Sprintf("1-06H0XW8R5SY28WMNTGH9Q%05d", i), "", user, 1, 2},
		}
	}
	var spent [2]time.Duration // each, shared
	defer luascript.ShareKeys(true)
	for b.Loop() {
		for v, share := range []bool{false, true} {
			luascript.ShareKeys(share)
			before, err := loadtest.RedisMainCPU(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			for range runs {
				for _, c := range m.RunAll(ctx, rdb, calls) {
					if err := c.Err(); err != nil {
						b.Fatal(err)
					}
				}
			}
			after, err := loadtest.RedisMainCPU(ctx, rdb)
			if err != nil {
				b.Fatal(err)
			}
			spent[v] += after - before
		}
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N*runs*n) }
	b.ReportMetric(per(spent[0]), "each-redis-µs/call")
	b.ReportMetric(per(spent[1]), "shared-redis-µs/call")
}
