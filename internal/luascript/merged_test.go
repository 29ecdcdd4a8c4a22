package luascript_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Calls naming the keys of an earlier call of the batch send them once,
// and every call still sees its own keys and arguments: key lists shared,
// new, empty, and one pushed out of pack's window of recent ones.
func TestMerged_callsWithTheSameKeys_sendThemOnce_eachSeesItsOwn(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	echo := luascript.NewMerged(`
local out = {}
for i = 1, calls.n do
  local r = {}
  for j = 1, calls.nk[i] do r[#r + 1] = KEYS[calls.k[i] + j] end
  r[#r + 1] = '|'
  for j = 1, calls.na[i] do r[#r + 1] = ARGV[calls.a[i] + j] end
  out[i] = r
end
return out
`)
	a, b := []string{"{s}:meta", "{s}:stock", "{s}:users"}, []string{"{s}:other"}
	lists := [][]string{a, a, b, nil, a, b, {"{s}:c"}, {"{s}:d"}, {"{s}:e"}, {"{s}:f"}, a, b, a, {"{s}:a"}}
	calls := make([]luascript.Call, len(lists))
	for i, keys := range lists {
		calls[i] = luascript.Call{Keys: keys, Args: []any{"call", i}}
	}
	cmds := echo.RunAll(ctx, rdb, calls)
	for i, cmd := range cmds {
		got, err := cmd.StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(slices.Clone(lists[i]), "|", "call"), strconv.Itoa(i))
		if !slices.Equal(got, want) {
			t.Fatalf("call %d saw %q, want %q", i, got, want)
		}
	}
	// What went to Redis: a, b, c, d, e, f, then a and b again (pushed out
	// of the window by c..f), then {s}:a; every other call's keys shared.
	keys, _ := luascript.Pack(calls)
	if len(keys) != 3+1+4+3+1+1 {
		t.Fatalf("%d keys sent: %q", len(keys), keys)
	}
}
