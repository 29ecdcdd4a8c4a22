package stock

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A take sent again (go-redis resends a script whose reply was lost) takes
// once: while its record stands it answers what it took, and after the
// transfer was finished (given, the record deleted: by Settle, say) it
// takes nothing more — before the tombstone set it took the units again,
// and the give, once per id, dropped them.
func TestTransferTake_sentAgain_takesOnce_evenAfterTheTransferFinished(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	k := rediskeys.ForShard(1, 1, 2)
	rdb.HSet(ctx, k.Meta, "total", 10, "expire_at_ms", 9_999_999_999_999)
	rdb.Set(ctx, k.Stock, 10, 0)
	keys := []string{k.Meta, k.Stock, k.Transit, k.Taken}
	take := func() int64 {
		t.Helper()
		n, err := takeScript.Run(ctx, rdb, keys, "t1", 0, 4).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := take(); n != 4 {
		t.Fatalf("took %d, want 4", n)
	}
	if n := take(); n != 4 {
		t.Fatalf("sent again: %d, want the first answer, 4", n)
	}
	rdb.HDel(ctx, k.Transit, "t1") // finished
	if n := take(); n != 0 {
		t.Fatalf("sent again after the transfer finished: took %d, want 0", n)
	}
	if left, _ := rdb.Get(ctx, k.Stock).Int64(); left != 6 {
		t.Fatalf("%d left, want 6", left)
	}
	if tot, _ := rdb.HGet(ctx, k.Meta, "total").Int64(); tot != 6 {
		t.Fatalf("allotment %d, want 6", tot)
	}
	for _, key := range []string{k.Taken} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
			t.Fatalf("%s has no expiry (%v)", key, ttl)
		}
	}
}
