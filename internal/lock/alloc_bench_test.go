package lock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
)

// What the order path's per-user lock costs this process: an obtain in a
// table, without a fence, then its release, from 64 goroutines on one
// client (their calls share pipelines), each on names of its own. B/op
// and allocs/op are the client's garbage per lock, the figure to cut when
// the api's allocation profile shows the lock (docs/benchmarks.md):
//
//	go test -run '^$' -bench TableObtainRelease -benchmem ./internal/lock/
func BenchmarkTableObtainRelease(b *testing.B) {
	rdb := testenv.StartRedis(b).Client(b)
	c := lock.New(rdb)
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	in, noFence := lock.InTable("order-user:1"), lock.WithoutFence()
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			name := strconv.FormatInt(next.Add(1), 10)
			l, err := c.Obtain(ctx, name, 5*time.Second, in, noFence)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// What deciding to elide the order path's per-user lock costs this process
// (no Redis: Elide only builds the lock's Ref): its table's keys are
// remembered, so a lock of a known table builds only its own channel's
// name (go test -run '^$' -bench ElideInTable -benchmem ./internal/lock/).
func BenchmarkElideInTable(b *testing.B) {
	c := lock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	b.Cleanup(func() { c.Close() })
	opts := []lock.Option{lock.WithFamily("order-user"), lock.WithoutFence(), lock.InTable("order-user:1")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Elide(strconv.Itoa(10_000_000+i%1000), opts...); !ok {
			b.Fatal("not elided")
		}
	}
}
