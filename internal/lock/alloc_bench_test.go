package lock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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
