package redispipe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/testenv"
)

// On a cluster client the calls of one group are merged by slot: the calls
// piled up behind a paused master run as one EVALSHA per slot, each on the
// master holding it, and a call whose keys span slots runs alone and gets
// Redis's own CROSSSLOT refusal without failing the others.
func TestMerged_clusterClient_mergesCallsOfOneSlot(t *testing.T) {
	cluster := testenv.StartRedisCluster(t, 3)
	rdb := cluster.Client(t)
	b := New(rdb)
	defer b.Close()
	ctx := context.Background()
	nodes := make([]*redis.Client, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		nodes[i] = n.Client(t)
		if err := incrEach.Load(ctx, nodes[i]); err != nil {
			t.Fatal(err)
		}
	}
	evalshas := func() int {
		sum := 0
		for _, n := range nodes {
			sum += evalshaCalls(t, n)
		}
		return sum
	}
	// The first call goes out at once and hangs on its paused master; the
	// rest pile up behind it as one pipeline.
	first := "{a}first"
	master, err := rdb.MasterForKey(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	var paused *testenv.RedisServer
	for _, n := range cluster.Nodes {
		if n.Addr() == master.Options().Addr {
			paused = n
		}
	}
	if paused == nil {
		t.Fatalf("no master holds %s's slot", first)
	}
	before := evalshas()
	paused.Pause()
	firstDone := make(chan error, 1)
	go func() { firstDone <- b.RunMerged(ctx, incrEach, "", []string{first}, 1).Err() }()
	waitSending(t, b, 0)
	tags := []string{"a", "b", "c"}
	const each = 10
	type answer struct {
		key string
		n   int64
		err error
	}
	answers := make(chan answer, len(tags)*each+2)
	for _, tag := range tags {
		for i := 1; i <= each; i++ {
			key := fmt.Sprintf("{%s}%d", tag, i)
			go func() {
				n, err := b.RunMerged(ctx, incrEach, "", []string{key}, i).Int64()
				answers <- answer{key, n, err}
			}()
		}
	}
	go func() {
		_, err := b.RunMerged(ctx, incrEach, "", []string{"{a}x", "{b}x"}, 7).Int64()
		answers <- answer{"cross", 0, err}
	}()
	waitPending(t, b, len(tags)*each+1)
	// A call of slot 0 after it: it must not join the cross-slot call.
	zero := ""
	for i := 0; zero == ""; i++ {
		if k := fmt.Sprintf("z%d", i); rediskeys.Slot(k) == 0 {
			zero = k
		}
	}
	go func() {
		n, err := b.RunMerged(ctx, incrEach, "", []string{zero}, 5).Int64()
		answers <- answer{"zero", n, err}
	}()
	waitPending(t, b, len(tags)*each+2)
	time.Sleep(10 * time.Millisecond)
	paused.Resume()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for range len(tags)*each + 2 {
		a := <-answers
		if a.key == "zero" {
			if a.err != nil || a.n != 5 {
				t.Fatalf("a call of slot 0 after a cross-slot one: %d, %v; want 5 (run apart from it)", a.n, a.err)
			}
			continue
		}
		if a.key == "cross" {
			if a.err == nil || !strings.Contains(a.err.Error(), "CROSSSLOT") {
				t.Fatalf("a call whose keys span slots: %v, want Redis's CROSSSLOT", a.err)
			}
			continue
		}
		var i int64
		_, _ = fmt.Sscanf(a.key[3:], "%d", &i)
		if a.err != nil || a.n != i {
			t.Fatalf("%s: %d, %v; want %d (its own answer)", a.key, a.n, a.err, i)
		}
		if v, _ := rdb.Get(ctx, a.key).Int64(); v != i {
			t.Fatalf("%s = %d, want %d: the call ran once", a.key, v, i)
		}
	}
	// The first alone, then one run per slot ({a}, {b}, {c}, slot 0); the
	// cross-slot call was refused before it ran.
	if got := evalshas() - before; got != 2+len(tags) {
		t.Fatalf("%d EVALSHA ran for 2+%d calls over %d slots, want %d", got, len(tags)*each, len(tags)+1, 2+len(tags))
	}
}
