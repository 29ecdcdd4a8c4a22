package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newHub starts a hub on rdb, waits until every shard is subscribed, and
// closes it when the test ends.
func newHub(t *testing.T, rdb redis.UniversalClient, cfg stream.Config) *stream.Hub {
	t.Helper()
	h := stream.NewHub(rdb, cfg)
	t.Cleanup(h.Close)
	waitFor(t, 10*time.Second, "every shard subscribed", func() bool {
		return h.Stats().Subscribed >= rediskeys.StreamShards
	})
	return h
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func item(topic string, seq int64) stream.Item {
	return stream.Item{Topics: []string{topic}, Subject: topic, Seq: seq, ID: fmt.Sprintf("evt_%s_%d", topic, seq),
		Name: "order.paid", Data: json.RawMessage(`{"n":1}`)}
}

// receive takes the next item of s within 5 s.
func receive(t *testing.T, s *stream.Subscription) stream.Item {
	t.Helper()
	select {
	case it := <-s.Items():
		return it
	case <-s.Done():
		t.Fatalf("subscription ended: %v", s.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("no item within 5 s")
	}
	return stream.Item{}
}

// A subscriber that reads nothing is dropped once it is Buffer behind;
// the others get every item, and the hub never waits for the slow one.
// (Published in rounds the readers keep up with, so that a reader slowed
// by a loaded machine is not itself the slow one.)
func TestHub_slowSubscriber_isDroppedWithoutHoldingOthers(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	h := newHub(t, rdb, stream.Config{Buffer: 32})
	slow, err := h.Subscribe("order:A")
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := h.Subscribe("order:A")
	other, _ := h.Subscribe("order:B")
	p := stream.NewPublisher(rdb)
	ctx := context.Background()
	const rounds, perRound = 10, 20
	var got [2]atomic.Int64
	for k, s := range []*stream.Subscription{fast, other} {
		go func() {
			for {
				select {
				case <-s.Items():
					got[k].Add(1)
				case <-s.Done():
					return
				}
			}
		}()
	}
	seq := int64(0)
	for r := range rounds {
		var batch []stream.Item
		for range perRound {
			seq++
			batch = append(batch, item("order:A", seq), item("order:B", seq))
		}
		if err := p.PublishItems(ctx, batch); err != nil {
			t.Fatal(err)
		}
		want := int64((r + 1) * perRound)
		waitFor(t, 10*time.Second, "the reading subscribers got the round", func() bool {
			return got[0].Load() == want && got[1].Load() == want
		})
	}
	select {
	case <-slow.Done():
	default:
		t.Fatal("the slow subscriber was not dropped")
	}
	if slow.Err() != stream.ErrDropped {
		t.Fatalf("slow subscriber ended with %v, want ErrDropped", slow.Err())
	}
	if fast.Err() != nil || other.Err() != nil {
		t.Fatalf("a reading subscriber ended: %v, %v", fast.Err(), other.Err())
	}
	if st := h.Stats(); st.Dropped != 1 || st.Subscribers != 2 {
		t.Fatalf("stats %+v, want 1 dropped and 2 left", st)
	}
}

// A thousand subscribers of a thousand topics share the hub's shard
// subscriptions: each shard's channel has exactly one subscriber in Redis,
// and the process holds StreamShards pub/sub connections.
func TestHub_thousandSubscribers_shareOneSubscriptionPerShard(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	h := newHub(t, rdb, stream.Config{})
	subs := make([]*stream.Subscription, 1000)
	for i := range subs {
		s, err := h.Subscribe(stream.OrderTopic(fmt.Sprintf("O%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	ctx := context.Background()
	for i := range rediskeys.StreamShards {
		ch := rediskeys.StreamChannel(i)
		n, err := rdb.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[ch] != 1 {
			t.Fatalf("channel %s has %d subscribers, want 1", ch, n[ch])
		}
	}
	if n := pubsubClients(t, rdb); n != rediskeys.StreamShards {
		t.Fatalf("%d pub/sub connections, want %d", n, rediskeys.StreamShards)
	}
	// And each gets its own topic's item.
	p := stream.NewPublisher(rdb)
	var batch []stream.Item
	for i := range subs {
		batch = append(batch, item(stream.OrderTopic(fmt.Sprintf("O%04d", i)), 2))
	}
	if err := p.PublishItems(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		if it := receive(t, s); it.Subject != stream.OrderTopic(fmt.Sprintf("O%04d", i)) {
			t.Fatalf("subscriber %d got %s's item", i, it.Subject)
		}
	}
}

// pubsubClients counts the server's clients in pub/sub (CLIENT LIST's
// sub or ssub above 0).
func pubsubClients(t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	list, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range splitLines(list) {
		var sub, ssub int
		for _, f := range splitFields(line) {
			fmt.Sscanf(f, "sub=%d", &sub)
			fmt.Sscanf(f, "ssub=%d", &ssub)
		}
		if sub > 0 || ssub > 0 {
			n++
		}
	}
	return n
}

// Redis killed and restarted: every shard subscribes again by itself, its
// subscribers are told to catch up (Resync), and items flow again.
func TestHub_redisRestart_resubscribesAndTellsSubscribersToCatchUp(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)
	h := newHub(t, rdb, stream.Config{PingEvery: 500 * time.Millisecond})
	s, _ := h.Subscribe("order:R")
	p := stream.NewPublisher(rdb)
	ctx := context.Background()
	if err := p.PublishItems(ctx, []stream.Item{item("order:R", 1)}); err != nil {
		t.Fatal(err)
	}
	receive(t, s)
	select { // the first subscription's resync, if it was pending
	case <-s.Resync():
	default:
	}
	before := h.Stats().Subscribed
	srv.Kill()
	if err := p.PublishItems(ctx, []stream.Item{item("order:R", 2)}); err == nil {
		t.Fatal("a publish to a dead Redis succeeded")
	}
	srv.Restart()
	select {
	case <-s.Resync():
	case <-time.After(15 * time.Second):
		t.Fatal("no resync within 15 s of the restart")
	}
	waitFor(t, 15*time.Second, "every shard subscribed again", func() bool {
		return h.Stats().Subscribed-before == rediskeys.StreamShards
	})
	if err := p.PublishItems(ctx, []stream.Item{item("order:R", 3)}); err != nil {
		t.Fatal(err)
	}
	if it := receive(t, s); it.Seq != 3 {
		t.Fatalf("after the restart got seq %d, want 3", it.Seq)
	}
}

// Close ends every subscription with ErrClosed and refuses new ones.
func TestHub_close_endsSubscriptions(t *testing.T) {
	srv := testenv.StartRedis(t)
	h := newHub(t, srv.Client(t), stream.Config{})
	s, _ := h.Subscribe("order:C")
	done := make(chan struct{})
	go func() { h.Close(); close(done) }()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not ended by Close")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if s.Err() != stream.ErrClosed {
		t.Fatalf("ended with %v, want ErrClosed", s.Err())
	}
	if _, err := h.Subscribe("order:D"); err != stream.ErrClosed {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

// On a Redis Cluster the publisher uses SPUBLISH and the hub SSUBSCRIBE,
// each shard's channel on its slot's master.
func TestHub_cluster_shardedPubSub(t *testing.T) {
	rc := testenv.StartRedisCluster(t, 3)
	rdb := rc.Client(t)
	h := newHub(t, rdb, stream.Config{})
	var subs []*stream.Subscription
	for i := range 32 { // topics over every shard
		s, _ := h.Subscribe(stream.OrderTopic(fmt.Sprint("K", i)))
		subs = append(subs, s)
	}
	var batch []stream.Item
	for i := range subs {
		batch = append(batch, item(stream.OrderTopic(fmt.Sprint("K", i)), 1))
	}
	if err := stream.NewPublisher(rdb).PublishItems(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		if it := receive(t, s); it.Subject != stream.OrderTopic(fmt.Sprint("K", i)) {
			t.Fatalf("subscriber %d got %s", i, it.Subject)
		}
	}
}

func splitLines(s string) []string  { return strings.Split(strings.TrimSpace(s), "\n") }
func splitFields(s string) []string { return strings.Fields(s) }

// Embedded mode's in-memory Redis (miniredis, EMBEDDED_MODE=memory) has
// PUBLISH and SUBSCRIBE: the hub works there too.
func TestHub_miniredis_embeddedMemoryMode(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	h := newHub(t, rdb, stream.Config{})
	s, _ := h.Subscribe("order:M")
	if err := stream.NewPublisher(rdb).PublishItems(context.Background(), []stream.Item{item("order:M", 1)}); err != nil {
		t.Fatal(err)
	}
	if it := receive(t, s); it.Seq != 1 || it.Subject != "order:M" {
		t.Fatalf("got %+v", it)
	}
}
