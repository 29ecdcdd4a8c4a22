package stock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
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

// A pull is shared by the callers pulling into one shard at once, each
// wanting its own quantity. The one that started it wanted 1, which the
// shard held by then; the one that joined wants 3, which the shard does
// not hold but the sale does (in other shards): it is told to place again,
// never refused — before, it was answered "not enough" with 31 units left.
func TestPull_sharedByALargerOrder_placesAgain_notRefused(t *testing.T) {
	_, k := onSale(t, 190, 31)
	ctx := context.Background()
	// Shard 2 holds 1 (its 10 less 9 moved to shard 0).
	if n, err := k.Transfer(ctx, 190, 2, 0, 9); err != nil || n != 9 {
		t.Fatalf("transfer: %d, %v", n, err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var pulls []int64 // the wants pulls began with
	k.beforePull = func(want int64) {
		pulls = append(pulls, want)
		if len(pulls) == 1 {
			close(started)
			<-release
		}
	}
	first := make(chan error, 1)
	go func() {
		more, _, err := k.Pull(ctx, 190, 2, 1)
		if err == nil && !more {
			err = errors.New("the pull for 1 said no more, with the shard holding 1")
		}
		first <- err
	}()
	<-started // the first caller's pull is in flight, held here
	go func() {
		time.Sleep(100 * time.Millisecond) // the Pull below has joined it by then
		close(release)
	}()
	more, left, err := k.Pull(ctx, 190, 2, 3)
	if err != nil || !more {
		t.Fatalf("the order for 3 that joined the pull: more %v, left %d, %v; want to place again", more, left, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if len(pulls) != 1 || pulls[0] != 1 {
		t.Fatalf("pulls began with wants %v, want one pull, for 1: the order for 3 joined it", pulls)
	}
}

// A caller that joins a shared pull after the pull proved the sale sold
// out is not refused on that proof: a unit returned between the proof and
// the caller's coming, and a refusal must be true of a moment of the
// caller's own request. The pull's first caller, whose request began
// before the proof, is refused; the joiner places again (and finds the
// unit). Before, the joiner was answered sold out with a unit free.
func TestPull_joinedAfterTheProof_placesAgain_notRefused(t *testing.T) {
	rdb, k := onSale(t, 192, 3)
	ctx := context.Background()
	for sh := range 3 { // every shard sold its unit
		rdb.DecrBy(ctx, rediskeys.ForShard(192, sh, 3).Stock, 1)
	}
	proved, release := make(chan struct{}), make(chan struct{})
	k.afterProof = func() {
		close(proved)
		<-release
	}
	type answer struct {
		more bool
		left int64
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		more, left, err := k.Pull(ctx, 192, 1, 1)
		first <- answer{more, left, err}
	}()
	<-proved // the pull found the sale sold out, and is held before it answers
	// A cancelled order gives its unit back to shard 2 (as sale_return does).
	s2 := rediskeys.ForShard(192, 2, 3)
	rdb.Incr(ctx, s2.Stock)
	rdb.HIncrBy(ctx, s2.Meta, "returned", 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // the Pull below has joined the held one by then
		close(release)
	}()
	more, left, err := k.Pull(ctx, 192, 1, 1)
	if err != nil || !more {
		t.Fatalf("the caller that joined after the proof: more %v, left %d, %v; want to place again (a unit is free)", more, left, err)
	}
	if a := <-first; a.err != nil || a.more || a.left != 0 {
		t.Fatalf("the pull's first caller: %+v; want refused, sold out (its request began before the proof)", a)
	}
	k.afterProof = nil
	if more, _, err := k.Pull(ctx, 192, 1, 1); err != nil || !more {
		t.Fatalf("pulled again: more %v, %v; want the returned unit moved", more, err)
	}
	if n, _ := rdb.Get(ctx, rediskeys.ForShard(192, 1, 3).Stock).Int64(); n != 1 {
		t.Fatalf("shard 1 holds %d, want the returned unit", n)
	}
}

// One unit left, in shard 0, and orders for 2 units in each of the other
// shards: every one is refused at once as "not enough" (with 1 left), and
// the unit stays where it is. Before, each shard's pull moved the unit to
// itself, the order there still could not take 2, and the shards bounced
// the unit between them until their orders gave up with a 503.
func TestPull_fewerLeftThanWanted_refusedWithoutMovingUnits(t *testing.T) {
	rdb, k := onSale(t, 191, 3)
	ctx := context.Background()
	for sh := 1; sh < 3; sh++ { // shards 1 and 2 sold theirs
		rdb.DecrBy(ctx, rediskeys.ForShard(191, sh, 3).Stock, 1)
	}
	for _, to := range []int{1, 2, 1, 2} {
		more, left, err := k.Pull(ctx, 191, to, 2)
		if err != nil || more || left != 1 {
			t.Fatalf("pull for 2 into shard %d: more %v, left %d, %v; want refused with 1 left", to, more, left, err)
		}
	}
	if n, _ := rdb.Get(ctx, rediskeys.ForShard(191, 0, 3).Stock).Int64(); n != 1 {
		t.Fatalf("shard 0 holds %d, want its 1: no move serves an order for 2", n)
	}
}

// onSale is a Keeper on a throwaway redis-server holding sale id, a flash
// sale of total units in 3 shards, on sale now.
func onSale(t *testing.T, id int64, total int) (*redis.Client, *Keeper) {
	t.Helper()
	rdb := testenv.StartRedis(t).Client(t)
	k := New(rdb, Config{})
	a := activity.Activity{ID: id, Type: activity.Seckill, Status: activity.Published, TotalStock: total, PerUserLimit: 5,
		Shards: 3, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute}
	if _, err := k.Load(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return rdb, k
}
