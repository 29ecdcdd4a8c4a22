package lock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What the table lock's scripts cost Redis, against what any merged script
// of the same calls costs: each b.N is one batch of 64 obtains in one table
// (table_obtain.lua) and then their 64 releases (table_release.lua), as one
// pipeline's worth of the order
// path's user locks; "redis-µs/pair" is redis-server's main-thread CPU (INFO
// cpu) per obtain and release. The floors send the same keys and arguments:
// "frame" runs merged.lua around a body that answers each call {1, 0},
// "bare" a script that only answers 1 per call (no frame), and
// "bare_one_arg" the same with one argument per call instead of the
// obtain's nine keys and arguments and the release's five. Their
// difference to "table" is the lock's own Lua; "elided" is the same locks
// checked free in one script instead (lib_lock.lua's lock_holders, as a
// caller's elided step does, the step itself left out); "bare" is what
// Redis spends
// taking a call's arguments in and its answer out, and "bare" less
// "bare_one_arg" what the arguments themselves cost. A quick loop (seconds, not
// bench-rediscost's minutes) for trying a change to the scripts:
//
//	go test -run '^$' -bench TableScripts_redisCPU -benchtime 2000x ./internal/lock/
func BenchmarkTableScripts_redisCPU(b *testing.B) {
	rdb := testenv.StartRedis(b).Client(b)
	ctx := context.Background()
	const n = 64
	frame := [2]*luascript.Merged{
		luascript.NewMerged("local o = {} for i = 1, calls.n do o[i] = {1, 0} end return o"),
		luascript.NewMerged("local o = {} for i = 1, calls.n do o[i] = {1, false} end return o"),
	}
	libLockSrc, err := lock.Lua.Source("lib_lock")
	if err != nil {
		b.Fatal(err)
	}
	elided := luascript.NewMerged(libLockSrc + `
local refs = {}
for i = 1, calls.n do
  refs[i] = lock_ref(calls.k[i], calls.a[i])
end
local held = lock_holders(refs, table_now())
local o = {}
for i = 1, calls.n do
  o[i] = held[i] and 0 or 1
end
return o
`)
	bare := redis.NewScript("local n = tonumber(ARGV[1]) local o = {} for i = 1, n do o[i] = 1 end return o")
	// calls are one batch's obtains and releases, of names never used before.
	seq := 0
	calls := func() (obtains, releases []luascript.Call) {
		obtains, releases = make([]luascript.Call, n), make([]luascript.Call, n)
		for i := range obtains {
			seq++
			// An owner value as the client makes it: token, pid, time, host, label.
			sep := lock.MetaSep
			value := fmt.Sprintf("%032x%s12345%s1732460000000%shostname-abc%suser", seq, sep, sep, sep, sep)
			name := "u" + strconv.Itoa(seq)
			obtains[i] = luascript.Call{Keys: []string{"fs:{act:1}:ul", "fs:{act:1}:ulf"}, Args: []any{name, value, 5000, 0, 0, "0", 15000}}
			releases[i] = luascript.Call{Keys: []string{"fs:{act:1}:ul"}, Args: []any{name, value, "ch"}}
		}
		return obtains, releases
	}
	run := func(b *testing.B, m *luascript.Merged, cs []luascript.Call) {
		for _, c := range m.RunAll(ctx, rdb, cs) {
			if err := c.Err(); err != nil && err != redis.Nil {
				b.Fatal(err)
			}
		}
	}
	runBare := func(b *testing.B, cs []luascript.Call) {
		var keys []string
		args := []any{len(cs)}
		for _, c := range cs {
			args = append(args, len(c.Keys), len(c.Args))
		}
		for _, c := range cs {
			keys = append(keys, c.Keys...)
			args = append(args, c.Args...)
		}
		if err := bare.Run(ctx, rdb, keys, args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []struct {
		name string
		pair func(b *testing.B, obtains, releases []luascript.Call)
	}{
		{"table", func(b *testing.B, o, r []luascript.Call) {
			run(b, lock.TableObtainMerged, o)
			run(b, lock.TableReleaseMerged, r)
		}},
		{"elided", func(b *testing.B, o, _ []luascript.Call) {
			// The same locks checked free in one script, as an elided
			// step's script does before its step.
			el := make([]luascript.Call, len(o))
			for i, c := range o {
				el[i] = luascript.Call{Keys: []string{c.Keys[0], c.Keys[0]}, Args: []any{c.Args[0], "", "ch"}}
			}
			run(b, elided, el)
		}},
		{"frame", func(b *testing.B, o, r []luascript.Call) { run(b, frame[0], o); run(b, frame[1], r) }},
		{"bare", func(b *testing.B, o, r []luascript.Call) { runBare(b, o); runBare(b, r) }},
		{"bare_one_arg", func(b *testing.B, o, r []luascript.Call) {
			one := func(cs []luascript.Call) []luascript.Call {
				out := make([]luascript.Call, len(cs))
				for i, c := range cs {
					out[i] = luascript.Call{Args: c.Args[:1]}
				}
				return out
			}
			runBare(b, one(o))
			runBare(b, one(r))
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			o, r := calls()
			v.pair(b, o, r) // loads the scripts
			before := mainCPU(b, rdb)
			b.ResetTimer()
			for range b.N {
				o, r := calls()
				v.pair(b, o, r)
			}
			b.StopTimer()
			b.ReportMetric(float64(mainCPU(b, rdb)-before)/float64(time.Microsecond)/float64(b.N*n), "redis-µs/pair")
		})
	}
}

// mainCPU is redis-server's main-thread CPU so far.
func mainCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	d, err := loadtest.RedisMainCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
