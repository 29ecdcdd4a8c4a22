package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Samples come back oldest first from the instant asked; one older than
// the window is trimmed by the next Add; the set expires by itself.
func TestSamples_addSinceAndTrim(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	k := redisstore.NewSamples(rdb)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	for _, s := range []admin.Sample{
		{At: now.Add(-admin.SampleWindow - time.Minute), Accepted: 1, Lag: time.Millisecond},
		{At: now.Add(-2 * time.Minute), Accepted: 10, Lag: 40 * time.Millisecond},
		{At: now.Add(-time.Minute), Accepted: 25, Lag: 120 * time.Millisecond},
		{At: now, Accepted: 30, Lag: 0},
	} {
		if err := k.Add(ctx, 7, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := k.Since(ctx, 7, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Accepted != 10 || got[1].Lag != 120*time.Millisecond || !got[2].At.Equal(now) {
		t.Fatalf("samples %+v: want the three in the window, oldest first", got)
	}
	if got, _ := k.Since(ctx, 7, now.Add(-90*time.Second)); len(got) != 2 {
		t.Fatalf("since 90 s ago: %+v", got)
	}
	if ttl := rdb.PTTL(ctx, rediskeys.For(7).Samples).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("the samples' ttl %v: want them to expire within the hour", ttl)
	}
	if got, err := k.Since(ctx, 8, now.Add(-time.Hour)); err != nil || len(got) != 0 {
		t.Fatalf("a sale never sampled: %v, %v", got, err)
	}
}
