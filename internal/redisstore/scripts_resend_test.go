package redisstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// go-redis sends a pipeline again after a read timeout although its
// scripts ran (a WAIT longer than the read timeout, a stalled reply): a
// script that accepts an order, opens or joins a group, run a second time
// with the same arguments, answers as its first run did and changes
// nothing more — no second order, group or unit. (Before, the second run
// found its own record, answered "number taken", and the service drew a
// new number: two orders for one request.)
func TestScripts_sentAgainAfterRunning_answerAsTheFirstRun(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	meta := groupMeta().with("accepted", 1, "groups_opened", 1)
	script := func(s *redis.Script) func(keys []string, args ...any) *redis.Cmd {
		return func(keys []string, args ...any) *redis.Cmd { return s.Run(ctx, rdb, keys, args...) }
	}
	for _, tc := range []struct {
		name string
		seed [][]any
		run  func(keys []string, args ...any) *redis.Cmd
		keys []string
		args []any
	}{
		{"accept", sale(loaded(flashMeta()), 10, nil),
			func(keys []string, args ...any) *redis.Cmd { return acceptMerged.Run(ctx, rdb, keys, args...) },
			acceptCall(act, 7, 2, no1, "").Keys, acceptCall(act, 7, 2, no1, "").Args},
		{"accept an item", itemsSale(loaded(flashMeta()), nil),
			func(keys []string, args ...any) *redis.Cmd { return acceptMerged.Run(ctx, rdb, keys, args...) },
			itemCall(act, 7, 1, no1, "", "B").Keys, itemCall(act, 7, 1, no1, "", "B").Args},
		{"open a group", sale(loaded(groupMeta()), 10, nil), script(openGroupScript), enterKeys(), enterArgs("open", 7, "")},
		{"join a group", join(sale(loaded(meta), 9, fields{"8": 1}), groupSeed(group("forming", 3, 1, 0, at(10*time.Minute)), fields{"8": no0}),
			[][]any{{"ZADD", act.Forming(), at(10 * time.Minute), gid}}), script(joinGroupScript),
			enterKeys(), enterArgs("join", 7, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb.FlushAll(ctx)
			base := rdb.Time(ctx).Val().UnixMilli()
			seed(t, rdb, base, tc.seed)
			first, err := tc.run(tc.keys, tc.args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, rdb, base)
			again, err := tc.run(tc.keys, tc.args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normReply(again, base), normReply(first, base)) {
				t.Fatalf("sent again: %v; the first run answered %v", normReply(again, base), normReply(first, base))
			}
			if got := snapshot(t, rdb, base); !reflect.DeepEqual(got, after) {
				t.Fatalf("sent again, Redis changed:\n got %v\nwant %v", got, after)
			}
		})
	}
}
