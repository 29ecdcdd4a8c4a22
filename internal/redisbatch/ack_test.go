package redisbatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

var (
	writeScript = redis.NewScript(`redis.call('INCR', KEYS[1]) return 1`)
	readScript  = redis.NewScript(`return redis.call('GET', KEYS[1])`)
)

// With the replica frozen nothing is reported acknowledged — not a
// script's write, and not a script that only read (a refusal, a replay):
// its answer rests on state the replica may lack, so the probe written
// before each WAIT makes WAIT cover it. A read pipeline (ReadAcked) is
// refused the same way. With the replica back, all are acknowledged.
func TestAck_replicaFrozen_nothingAcknowledged_readsIncluded(t *testing.T) {
	primary := testenv.StartRedis(t)
	replica := testenv.StartRedisWith(t, testenv.RedisConfig{ReplicaOf: primary.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testenv.WaitReplicasOnline(ctx, primary.Addr(), 1); err != nil {
		t.Fatal(err)
	}
	rdb := primary.Client(t)
	// "online" is set when the primary has sent its snapshot, possibly
	// before the replica has loaded it and sent its first ACK: wait for one.
	for err := errors.New("not yet"); err != nil; {
		if ctx.Err() != nil {
			t.Fatalf("the replica never acknowledged: %v", err)
		}
		err = Replicated(ctx, rdb, Ack{Replicas: 1, Timeout: time.Second}, "warm-up")
	}
	ack := Ack{Replicas: 1, Timeout: 200 * time.Millisecond, Probe: "probe"}
	b := NewAcked(rdb, ack)
	defer b.Close()
	check := func(what string, frozen bool) {
		t.Helper()
		for name, err := range map[string]error{
			"a write":     b.Run(ctx, writeScript, []string{"k"}).Err(),
			"a read":      b.Run(ctx, readScript, []string{"k"}).Err(),
			"a read pipe": ReadAcked(ctx, rdb, ack, func(p redis.Pipeliner) { p.Get(ctx, "k") }),
			"RunAcked":    func() error { _, err := RunAcked(ctx, rdb, ack, readScript, []string{"k"}); return err }(),
		} {
			if frozen != errors.Is(err, ErrNotReplicated) {
				t.Errorf("%s, %s: %v", what, name, err)
			}
		}
	}
	check("replica up", false)
	replica.Pause()
	check("replica frozen", true)
	replica.Resume()
	check("replica back", false)
}
