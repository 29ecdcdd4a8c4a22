package connect

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// In Sentinel mode the client follows a failover by itself: commands and a
// pub/sub subscription made on the old primary work on the new one once the
// sentinels promoted it.
func TestRedis_sentinelMode_followsAFailover(t *testing.T) {
	g := testenv.StartSentinelGroup(t, testenv.RedisConfig{}, 1, 3)
	rdb, err := Redis(g.URL(), RedisMode{SentinelMaster: g.MasterName})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "WAIT", 1, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	sub := rdb.Subscribe(ctx, "news")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	old := g.Primary.Addr()
	killed := time.Now()
	g.Primary.Kill()
	newAddr, err := g.WaitPrimaryOtherThan(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	var back time.Duration
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err := rdb.Set(cctx, "k", "after", 0).Err()
		ccancel()
		if err == nil {
			back = time.Since(killed)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("writes never resumed on %s: %v", newAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("primary %s killed; %s promoted; writes resumed %v after the kill", old, newAddr, back.Round(10*time.Millisecond))
	// The subscription moved to the new primary: a message published there arrives.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := rdb.Publish(ctx, "news", "hello").Err(); err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		msg, err := sub.ReceiveMessage(mctx)
		mcancel()
		if err == nil && msg.Payload == "hello" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subscription never heard a message on the new primary: %v", err)
		}
	}
}
