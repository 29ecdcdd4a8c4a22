package lock

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// state is a comparable picture of the keys a script touches: a string value
// or hash fields, plus whether the key expires. Volatile fields (server time)
// are replaced by "*".
type state map[string]string

func snapshot(t *testing.T, rdb *redis.Client) state {
	t.Helper()
	ctx := context.Background()
	out := state{}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		var v string
		switch rdb.Type(ctx, k).Val() {
		case "hash":
			h := rdb.HGetAll(ctx, k).Val()
			if _, ok := h["at"]; ok {
				h["at"] = "*"
			}
			var parts []string
			for _, f := range slices.Sorted(maps.Keys(h)) {
				parts = append(parts, f+"="+h[f])
			}
			v = "hash{" + strings.Join(parts, ",") + "}"
		default:
			v = rdb.Get(ctx, k).Val()
		}
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
	tokB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	lk   = "fs:lock:{k}"
	fk   = "fs:lock:{k}:fence"
)

func TestScripts(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	held := [][]any{{"HSET", lk, "token", tokA, "fence", "41", "host", "h", "pid", "1", "label", "", "at", "0"}, {"PEXPIRE", lk, 10000}, {"SET", fk, "41"}}
	heldState := state{lk: "hash{at=*,fence=41,host=h,label=,pid=1,token=" + tokA + "} ttl~10s", fk: "41 persist"}

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
			name: "obtain free lock with existing counter", seed: [][]any{{"SET", fk, "41"}},
			script: obtainScript, keys: []string{lk, fk}, args: []any{tokB, 5000, 60000, "host1", "77", "job"},
			want:  []any{int64(1), int64(42)},
			after: state{lk: "hash{at=*,fence=42,host=host1,label=job,pid=77,token=" + tokB + "} ttl~5s", fk: "42 ttl~60s"},
		},
		{
			name: "obtain held lock changes nothing", seed: held,
			script: obtainScript, keys: []string{lk, fk}, args: []any{tokB, 5000, 60000, "host1", "77", ""},
			want: []any{int64(0), int64(10000)}, after: heldState, roughPTTL: true,
		},
		{
			name: "release by owner deletes", seed: held,
			script: releaseScript, keys: []string{lk}, args: []any{tokA, "fs:lock:{k}:released"},
			want: int64(1), after: state{fk: "41 persist"},
		},
		{
			name: "release by another owner changes nothing", seed: held,
			script: releaseScript, keys: []string{lk}, args: []any{tokB, "fs:lock:{k}:released"},
			want: int64(0), after: heldState,
		},
		{
			name: "release of a missing lock", seed: nil,
			script: releaseScript, keys: []string{lk}, args: []any{tokA, "fs:lock:{k}:released"},
			want: int64(0), after: state{},
		},
		{
			name: "refresh by owner extends", seed: held,
			script: refreshScript, keys: []string{lk}, args: []any{tokA, 30000},
			want: int64(1), after: state{lk: strings.Replace(heldState[lk], "ttl~10s", "ttl~30s", 1), fk: "41 persist"},
		},
		{
			name: "refresh by another owner changes nothing", seed: held,
			script: refreshScript, keys: []string{lk}, args: []any{tokB, 30000},
			want: int64(0), after: heldState,
		},
		{
			name: "refresh of a missing lock creates nothing", seed: nil,
			script: refreshScript, keys: []string{lk}, args: []any{tokA, 30000},
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

func TestScripts_obtain_freshCounter_startsFromServerTimeMicros(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	now := rdb.Time(ctx).Val().UnixMicro()
	res, err := obtainScript.Run(ctx, rdb, []string{lk, fk}, tokA, 5000, 60000, "h", "1", "").Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if fence := res[1]; fence < now || fence > now+5_000_000 {
		t.Fatalf("fence %d, want server time in µs (about %d)", fence, now)
	}
	if stored, _ := rdb.Get(ctx, fk).Int64(); stored != res[1] {
		t.Fatalf("counter holds %d, fence returned %d", stored, res[1])
	}
	if f, _ := rdb.HGet(ctx, lk, "fence").Int64(); f != res[1] {
		t.Fatalf("lock hash fence %d, want %d (exact, not in exponent form)", f, res[1])
	}
}
