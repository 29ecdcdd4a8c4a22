package rediskeys_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Slot agrees with Redis's CLUSTER KEYSLOT, hash tags included.
func TestSlot_isRedisClusters(t *testing.T) {
	rdb := testenv.StartRedisWith(t, testenv.RedisConfig{Cluster: true}).Client(t)
	for _, key := range []string{"", "a", "fs:{act:42}:meta", "fs:{act:42:1:0}:stock", "{}x", "x{}y", "123456789", "fs:ltab:{act:7}"} {
		want, err := rdb.ClusterKeySlot(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := rediskeys.Slot(key); int64(got) != want {
			t.Errorf("Slot(%q) = %d, Redis says %d", key, got, want)
		}
	}
}

// A sale's shards fall each into its own of shards equal parts of the
// slot space, shard s s parts after shard 0's; the tags are fixed (every
// key of a live shard is found by its tag); shard 0 keeps the sale's tag.
func TestShardTag_spreadsAndIsFixed(t *testing.T) {
	if got := rediskeys.ShardTag(42, 0, 3); got != "act:42" || rediskeys.ForShard(42, 0, 3) != rediskeys.For(42) {
		t.Fatalf("shard 0's tag %q", got)
	}
	for _, id := range []int64{1, 42, 9_999_999} {
		base := int(rediskeys.Slot("act:" + strconv.FormatInt(id, 10)))
		for _, n := range []int{2, 3, 6, 64} {
			part := func(slot int) int { return slot * n / 16384 }
			for s := 1; s < n; s++ {
				tag := rediskeys.ShardTag(id, s, n)
				if got, want := part(int(rediskeys.Slot(tag))), (part(base)+s)%n; got != want {
					t.Fatalf("sale %d shard %d of %d: tag %q at slot %d, in part %d, not %d", id, s, n, tag, rediskeys.Slot(tag), got, want)
				}
				if rediskeys.ForShard(id, s, n).Meta != "fs:{"+tag+"}:meta" || rediskeys.ShardLockTable(id, s, n) != tag {
					t.Fatalf("shard %d's keys are not under its tag %q", s, tag)
				}
			}
		}
	}
	got := []string{rediskeys.ShardTag(42, 1, 3), rediskeys.ShardTag(42, 2, 3), rediskeys.ShardTag(7, 5, 64)}
	if want := []string{"act:42:1:2", "act:42:2:1", "act:7:5:21"}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("tags %q, were %q: every sharded sale's keys would be lost", got, want)
	}
}
