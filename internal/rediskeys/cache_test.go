package rediskeys

import (
	"sync"
	"testing"
)

// ForShard answers from its cache the keys forShard builds, whatever the
// order of the calls and their collisions in the cache's slots, from many
// goroutines at once; a call it remembers allocates nothing.
func TestForShard_cached_sameKeys_noAllocation(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 { // far more sales than slots: collisions
				id, shards := int64(1+(i*7+g)%3000), 1+i%4
				shard := i % shards
				want := forShard(id, shard, shards)
				if got := ForShard(id, shard, shards); got != want {
					t.Errorf("ForShard(%d, %d, %d) = %+v, want %+v", id, shard, shards, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if For(9) != ForShard(9, 0, 4) {
		t.Fatal("shard 0's keys differ with the count of shards")
	}
	if n := testing.AllocsPerRun(100, func() { _ = ForShard(42, 1, 3) }); n != 0 {
		t.Fatalf("ForShard of keys it remembers: %v allocations, want 0", n)
	}
}

// BenchmarkForShard: a sale's keys from the cache against built
// (go test -run '^$' -bench ForShard -benchmem ./internal/rediskeys/).
func BenchmarkForShard(b *testing.B) {
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = ForShard(42, 0, 1)
		}
	})
	b.Run("built (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = forShard(42, 0, 1)
		}
	})
}
