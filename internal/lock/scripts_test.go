package lock

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

// state is a comparable picture of the keys a script touches: each string
// value and its ttl rounded to seconds.
type state map[string]string

func snapshot(t *testing.T, rdb *redis.Client) state {
	t.Helper()
	ctx := context.Background()
	out := state{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		v := rdb.Get(ctx, k).Val()
		switch ttl := rdb.PTTL(ctx, k).Val(); {
		case ttl < 0:
			v += " persist"
		default:
			v += fmt.Sprintf(" ttl~%ds", (ttl.Milliseconds()+500)/1000)
		}
		out[k] = v
	}
	return out
}

func seed(t *testing.T, rdb *redis.Client, cmds [][]any) {
	t.Helper()
	for _, c := range cmds {
		if err := rdb.Do(context.Background(), c...).Err(); err != nil {
			t.Fatalf("seed %v: %v", c, err)
		}
	}
}

const (
	tokA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	valB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\x1f77\x1f1700000000001\x1fhost1\x1fjob"
	lk   = "fs:lock:{k}"
	fk   = "fs:lock:{k}:fence"
	wk   = "fs:lock:{k}:waiting"
)

func TestScripts(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	heldVal := tokA + "\x1f1\x1f1700000000000\x1fh\x1f"
	held := [][]any{{"SET", lk, heldVal, "PX", 10000}, {"SET", fk, "41"}}
	heldState := state{lk: heldVal + " ttl~10s", fk: "41 persist"}

	cases := []struct {
		name   string
		seed   [][]any
		script *redis.Script
		keys   []string
		args   []any
		want   any
		after  state
		// roughPTTL: the second returned value is a remaining ttl, compared
		// to want within a second.
		roughPTTL bool
	}{
		{
			// A counter ahead of the server clock (fences minted faster than
			// one a microsecond) counts on.
			name: "obtain free lock with a counter ahead of the clock", seed: [][]any{{"SET", fk, ahead}},
			script: obtainScript, keys: []string{lk, fk, wk}, args: []any{valB, 5000, 60000, 1, 0},
			want:  []any{int64(1), int64(aheadN + 1)},
			after: state{lk: valB + " ttl~5s", fk: fmt.Sprint(aheadN+1) + " persist"},
		},
		{
			name: "obtain reserving a block of 64 fences", seed: [][]any{{"SET", fk, ahead}},
			script: obtainScript, keys: []string{lk, fk, wk}, args: []any{valB, 5000, 60000, 64, 0},
			want:  []any{int64(1), int64(aheadN + 64)},
			after: state{lk: valB + " ttl~5s", fk: fmt.Sprint(aheadN+64) + " persist"},
		},
		{
			name: "obtain held lock changes nothing", seed: held,
			script: obtainScript, keys: []string{lk, fk, wk}, args: []any{valB, 5000, 60000, 1, 0},
			want: []any{int64(0), int64(10000)}, after: heldState, roughPTTL: true,
		},
		{
			name: "obtain held lock by a waiter marks it waited for", seed: held,
			script: obtainScript, keys: []string{lk, fk, wk}, args: []any{valB, 5000, 60000, 1, 3000},
			want: []any{int64(0), int64(10000)}, roughPTTL: true,
			after: state{lk: heldState[lk], fk: heldState[fk], wk: "1 ttl~3s"},
		},
		{
			name: "release by owner deletes", seed: held,
			script: releaseScript, keys: []string{lk, wk}, args: []any{heldVal, "fs:lock:{k}:released"},
			want: int64(1), after: state{fk: "41 persist"},
		},
		{
			name: "release by owner with waiters: consumes the marker, publishes", seed: append(held, []any{"SET", wk, "1", "PX", 3000}),
			script: releaseScript, keys: []string{lk, wk}, args: []any{heldVal, "fs:lock:{k}:released"},
			want: int64(2), after: state{fk: "41 persist"},
		},
		{
			name: "release by another owner changes nothing", seed: held,
			script: releaseScript, keys: []string{lk, wk}, args: []any{valB, "fs:lock:{k}:released"},
			want: int64(0), after: heldState,
		},
		{
			name: "release of a missing lock", seed: nil,
			script: releaseScript, keys: []string{lk, wk}, args: []any{heldVal, "fs:lock:{k}:released"},
			want: int64(0), after: state{},
		},
		{
			name: "refresh by owner extends", seed: held,
			script: refreshScript, keys: []string{lk}, args: []any{heldVal, 30000},
			want: int64(1), after: state{lk: strings.Replace(heldState[lk], "ttl~10s", "ttl~30s", 1), fk: "41 persist"},
		},
		{
			name: "refresh by another owner changes nothing", seed: held,
			script: refreshScript, keys: []string{lk}, args: []any{valB, 30000},
			want: int64(0), after: heldState,
		},
		{
			name: "refresh of a missing lock creates nothing", seed: nil,
			script: refreshScript, keys: []string{lk}, args: []any{heldVal, 30000},
			want: int64(0), after: state{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			rdb.FlushAll(ctx)
			seed(t, rdb, tc.seed)
			got, err := tc.script.Run(ctx, rdb, tc.keys, tc.args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if g, ok := got.([]any); ok && tc.roughPTTL && len(g) == 2 {
				want := tc.want.([]any)[1].(int64)
				if pttl := g[1].(int64); pttl > want || pttl < want-1000 {
					t.Fatalf("pttl %d, want about %d", pttl, want)
				}
				g[1] = want
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("returned %#v, want %#v", got, tc.want)
			}
			if after := snapshot(t, rdb); !reflect.DeepEqual(after, tc.after) {
				t.Fatalf("state after:\n got %v\nwant %v", after, tc.after)
			}
		})
	}
}

// ahead is a fence counter far ahead of the server clock in µs (year 2223;
// below 2^53, which Lua's numbers hold exactly).
const (
	ahead  = "8000000000000000"
	aheadN = 8000000000000000
)

// A counter behind the server clock — as after a failover promoted a
// replica that missed its last increments — moves up to the clock: the
// next fence is above every fence the lost increments handed out.
func TestScripts_obtain_counterBehindTheClock_jumpsToServerTimeMicros(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	rdb.Set(ctx, fk, "41", 0)
	now := rdb.Time(ctx).Val().UnixMicro()
	res, err := obtainScript.Run(ctx, rdb, []string{lk, fk, wk}, tokA, 5000, 60000, 64, 0).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if fence := res[1]; fence < now+64 || fence > now+5_000_000 {
		t.Fatalf("fence %d from a counter at 41, want the server time in µs plus the block (about %d)", fence, now+64)
	}
	if stored, _ := rdb.Get(ctx, fk).Int64(); stored != res[1] {
		t.Fatalf("counter holds %d, fence returned %d", stored, res[1])
	}
}

func TestScripts_obtain_freshCounter_startsFromServerTimeMicros(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	now := rdb.Time(ctx).Val().UnixMicro()
	res, err := obtainScript.Run(ctx, rdb, []string{lk, fk, wk}, tokA, 5000, 60000, 1, 0).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if fence := res[1]; fence < now || fence > now+5_000_000 {
		t.Fatalf("fence %d, want server time in µs (about %d)", fence, now)
	}
	if stored, _ := rdb.Get(ctx, fk).Int64(); stored != res[1] {
		t.Fatalf("counter holds %d, fence returned %d (exact, not in exponent form)", stored, res[1])
	}
	if ttl := rdb.PTTL(ctx, fk).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Fatalf("new counter ttl %v, want its 60s lifetime", ttl)
	}
}

// lib_lock.lua's lock_release, run for five refs at once: keys of their
// own and a table's fields. The held ones are released (one with a waiter
// wakes it, one whose waiter's marker is past its time does not, but the
// stale marker goes), the ones held by someone else are untouched, and a
// field of the caller's own value past its time is cleared, not released.
func TestScripts_lockRelease_keysAndTables(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	const (
		la, wa = "fs:lock:{a}", "fs:lock:{a}:waiting"
		lb, wb = "fs:lock:{b}", "fs:lock:{b}:waiting"
		tb     = "fs:ltab:{t}"
	)
	now := time.Now().UnixMilli()
	hold := func(ms int64, v string) string { return strconv.FormatInt(now+ms, 10) + "|" + v }
	seed(t, rdb, [][]any{
		{"SET", la, tokA, "PX", 10000}, {"SET", wa, "1", "PX", 3000},
		{"SET", lb, valB, "PX", 10000},
		{"HSET", tb, "x", hold(10000, tokA), "w|x", strconv.FormatInt(now+3000, 10),
			"y", hold(10000, tokA), "w|y", strconv.FormatInt(now-3000, 10),
			"z", hold(10000, valB), "old", hold(-1000, tokA)},
	})
	script := redis.NewScript(mustSource("lib_lock") + `
local refs = {}
for i = 1, #ARGV / 3 do
  refs[i] = lock_ref(2 * (i - 1), 3 * (i - 1))
end
return lock_release(refs, table_now())
`)
	keys := []string{la, wa, lb, wb, tb, tb, tb, tb, tb, tb, tb, tb}
	args := []any{"", tokA, "ch-a", "", tokA, "ch-b", "x", tokA, "ch-x", "y", tokA, "ch-y", "z", tokA, "ch-z", "old", tokA, "ch-old"}
	got, err := script.Run(ctx, rdb, keys, args...).Int64Slice()
	if want := []int64{2, 0, 2, 1, 0, 0}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("lock_release: %v, %v; want %v (a woken, b someone else's, x woken, y released, z someone else's, old past its time)", got, err, want)
	}
	if n := rdb.Exists(ctx, la, wa, wb).Val(); n != 0 {
		t.Errorf("%d of a's lock and marker and b's marker left, want none", n)
	}
	if v := rdb.Get(ctx, lb).Val(); v != valB {
		t.Errorf("b's lock %q, want its holder's untouched", v)
	}
	if f := rdb.HGetAll(ctx, tb).Val(); !reflect.DeepEqual(f, map[string]string{"z": hold(10000, valB)}) {
		t.Errorf("table after: %v, want only z's hold", f)
	}
}

// An obtain sent again after its answer was lost (go-redis resends a
// pipeline after a read timeout) finds its own value: obtained, not held
// by another.
func TestScripts_tableObtain_sentAgain_isObtained(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	call := luascript.Call{Keys: []string{"fs:ltab:{t}", "fs:ltab:{t}:fence"},
		Args: []any{"k", tokA, 5000, 60000, 0, 0, 60000}}
	for i := range 2 {
		got, err := tableObtainMerged.RunAll(ctx, rdb, []luascript.Call{call})[0].Result()
		if err != nil || !reflect.DeepEqual(got, []any{int64(1), int64(0)}) {
			t.Fatalf("run %d: %v, %v; want obtained", i+1, got, err)
		}
	}
	other := luascript.Call{Keys: call.Keys, Args: []any{"k", valB, 5000, 60000, 0, 0, 60000}}
	got, err := tableObtainMerged.RunAll(ctx, rdb, []luascript.Call{other})[0].Slice()
	if err != nil || got[0] != int64(0) {
		t.Fatalf("another owner: %v, %v; want held", got, err)
	}
}
