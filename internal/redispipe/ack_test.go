package redispipe

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replica, rdb := replicated(ctx, t)
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
	counts := func() (confirmed, short float64) {
		return testutil.ToFloat64(acks.WithLabelValues("confirmed")), testutil.ToFloat64(acks.WithLabelValues("short"))
	}
	check("replica up", false)
	c0, s0 := counts()
	replica.Pause()
	check("replica frozen", true)
	c1, s1 := counts()
	replica.Resume()
	check("replica back", false)
	c2, s2 := counts()
	// flashsale_redis_acks_total counts each WAIT by its result.
	if c1 != c0 || s1-s0 != 4 || c2-c1 != 4 || s2 != s1 {
		t.Errorf("acks counted: confirmed %v→%v→%v, short %v→%v→%v; want 4 short while frozen, 4 confirmed after",
			c0, c1, c2, s0, s1, s2)
	}
}

// A read through the pipe (RunRead) answers whatever the batch's WAIT says:
// with the replica frozen a write in its batch is refused, the read is not
// (it wrote nothing for a replica to hold; reads that must not say what a
// failover can take back are ReadAcked's). After Close it goes straight
// to Redis, and answers too.
func TestAck_replicaFrozen_runReadStillAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replica, rdb := replicated(ctx, t)
	b := NewAcked(rdb, Ack{Replicas: 1, Timeout: 200 * time.Millisecond, Probe: "probe"})
	if err := b.Run(ctx, writeScript, []string{"k"}).Err(); err != nil {
		t.Fatal(err)
	}
	replica.Pause()
	defer replica.Resume()
	var wg sync.WaitGroup
	var writeErr error
	var read string
	var readErr error
	wg.Go(func() { writeErr = b.Run(ctx, writeScript, []string{"k"}).Err() })
	wg.Go(func() { read, readErr = b.RunRead(ctx, readScript, []string{"k"}).Text() })
	wg.Wait()
	if !errors.Is(writeErr, ErrNotReplicated) {
		t.Errorf("the write with the replica frozen: %v; want ErrNotReplicated", writeErr)
	}
	if readErr != nil || (read != "1" && read != "2") {
		t.Errorf("the read with the replica frozen: %q, %v; want the counter", read, readErr)
	}
	b.Close()
	if read, err := b.RunRead(ctx, readScript, []string{"k"}).Text(); err != nil || read != "2" {
		t.Errorf("the read after Close: %q, %v; want 2", read, err)
	}
}

// Concurrent callers of an acked pipe share WAITs: the scripts of the
// calls in flight go in one pipeline, ended by one probe and one WAIT, so
// N calls cost Redis far fewer than N WAITs (INFO commandstats counts them
// on the primary), and every call is acknowledged with its own answer.
func TestAck_concurrentCalls_shareOneWaitPerPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, rdb := replicated(ctx, t)
	b := NewAcked(rdb, Ack{Replicas: 1, Timeout: 2 * time.Second, Probe: "probe"})
	defer b.Close()

	const n = 256
	if err := echoScript.Load(ctx, rdb).Err(); err != nil { // no NOSCRIPT round to count
		t.Fatal(err)
	}
	waitsBefore, evalsBefore := calls(ctx, t, rdb, "wait"), calls(ctx, t, rdb, "evalsha")
	start := make(chan struct{})
	answers := make(chan int64, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			v, err := b.Run(ctx, echoScript, []string{"k"}).Int64()
			if err != nil {
				t.Errorf("a call: %v", err)
				return
			}
			answers <- v
		}()
	}
	close(start)
	wg.Wait()
	close(answers)
	seen := map[int64]bool{}
	for v := range answers {
		seen[v] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct answers of %d calls", len(seen), n)
	}
	waits, evals := calls(ctx, t, rdb, "wait")-waitsBefore, calls(ctx, t, rdb, "evalsha")-evalsBefore
	t.Logf("%d calls: %d EVALSHA, %d WAIT", n, evals, waits)
	if evals != n {
		t.Fatalf("%d EVALSHA for %d calls: the count is not of these calls", evals, n)
	}
	// At least two pipelines (a pipeline holds 128 calls); far fewer WAITs
	// than calls, with room for a loaded machine where callers trickle in.
	if waits < 2 || waits > n/8 {
		t.Fatalf("%d WAITs for %d concurrent calls: want 2 to %d", waits, n, n/8)
	}
}

// replicated starts a primary and its replica, and returns the replica and
// a client of the primary once the replica acknowledges writes (waitAcked).
func replicated(ctx context.Context, t *testing.T) (*testenv.RedisServer, *redis.Client) {
	t.Helper()
	primary := testenv.StartRedis(t)
	replica := testenv.StartRedisWith(t, testenv.RedisConfig{ReplicaOf: primary.Addr()})
	rdb := primary.Client(t)
	waitAcked(ctx, t, primary, rdb)
	return replica, rdb
}

// waitAcked waits until the primary's replica is online and has
// acknowledged a write.
func waitAcked(ctx context.Context, t *testing.T, primary *testenv.RedisServer, rdb *redis.Client) {
	t.Helper()
	if err := testenv.WaitReplicasOnline(ctx, primary.Addr(), 1); err != nil {
		t.Fatal(err)
	}
	// "online" is set when the primary has sent its snapshot, possibly
	// before the replica has loaded it and sent its first ACK: wait for one.
	for err := errors.New("not yet"); err != nil; {
		if ctx.Err() != nil {
			t.Fatalf("the replica never acknowledged: %v", err)
		}
		err = Replicated(ctx, rdb, Ack{Replicas: 1, Timeout: time.Second}, "warm-up")
	}
}

// calls is how many times Redis ran cmd (INFO commandstats).
func calls(ctx context.Context, t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return n
	}
	return 0
}
