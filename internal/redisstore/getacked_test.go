package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/testenv"
)

// GetAcked reads an order only with the replica's acknowledgement: with the
// replica frozen it is ErrNotReplicated (an answer a failover could take
// back is not given), while Get still reads; back, both read the same
// order, persisted alike.
func TestOrders_getAcked_refusedWhileTheReplicaLags(t *testing.T) {
	primary := testenv.StartRedis(t)
	replica := testenv.StartRedisWith(t, testenv.RedisConfig{ReplicaOf: primary.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := primary.Client(t)
	if err := testenv.WaitReplicasOnline(ctx, primary.Addr(), 1); err != nil {
		t.Fatal(err)
	}
	ack := redispipe.Ack{Replicas: 1, Timeout: 200 * time.Millisecond}
	for err := errors.New("not yet"); err != nil; { // the replica's first ACK
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		err = redispipe.Replicated(ctx, rdb, ack, "warm-up")
	}
	s := New(rdb, Config{Ack: ack})
	defer s.Close()
	const no = "7-06H0J68TSYHN2J2MDXSS60AGDR"
	if err := rdb.HSet(ctx, rediskeys.For(7).Orders, no, "42|1|990|paid|1764000000000|1764000600000").Err(); err != nil {
		t.Fatal(err)
	}
	want, err := s.Get(ctx, no)
	if err != nil || want.Status != order.Paid || want.UserID != 42 {
		t.Fatalf("Get: %+v, %v", want, err)
	}
	if got, err := s.GetAcked(ctx, no); err != nil || got != want {
		t.Fatalf("GetAcked with the replica up: %+v, %v; want %+v", got, err, want)
	}
	replica.Pause()
	if _, err := s.GetAcked(ctx, no); !errors.Is(err, order.ErrNotReplicated) {
		t.Fatalf("GetAcked with the replica frozen: %v, want ErrNotReplicated", err)
	}
	if _, err := s.Get(ctx, no); err != nil {
		t.Fatalf("Get with the replica frozen: %v", err)
	}
	replica.Resume()
	if got, err := s.GetAcked(ctx, no); err != nil || got != want {
		t.Fatalf("GetAcked with the replica back: %+v, %v", got, err)
	}
	if _, err := s.GetAcked(ctx, "7-06H0J68TSYHN2J2MDXSS60AGDS"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("GetAcked of no order: %v, want ErrNotFound", err)
	}
}
