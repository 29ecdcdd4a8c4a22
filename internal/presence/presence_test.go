package presence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clock is a settable clock for the tracker.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock() *clock               { c := &clock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *clock) tracker(rdb redis.UniversalClient) *presence.Tracker {
	return presence.New(rdb, onSale{}, presence.Config{TTL: 5 * time.Minute, Now: c.now})
}

// onSale answers every activity id with a sale on: for the tests that
// watch ids without creating activities.
type onSale struct{}

func (onSale) Activity(_ context.Context, id int64) (activity.Activity, error) {
	return activity.Activity{ID: id, Status: activity.Published, EndsAt: time.Now().Add(24 * time.Hour)}, nil
}

// sales is an activity reader over a map, answering as the catalog does:
// an unknown id or a draft is not found.
type sales map[int64]activity.Activity

func (s sales) Activity(_ context.Context, id int64) (activity.Activity, error) {
	a, ok := s[id]
	if !ok || a.Status == activity.Draft {
		return activity.Activity{}, activity.ErrNotFound
	}
	return a, nil
}

// Users and devices are online from their heartbeat until the ttl passes
// without another; watching an activity counts there too; the last
// heartbeat is remembered; expired clients leave the sets.
func TestTracker_onlineUntilTheTTLPassesWithoutAHeartbeat(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	clk := newClock()
	tr := clk.tracker(rdb)
	defer tr.Close()
	beat := func(c presence.Client, act int64) {
		t.Helper()
		if err := tr.Heartbeat(ctx, c, act); err != nil {
			t.Fatal(err)
		}
	}
	beat(presence.Client{UserID: 1}, 0)
	beat(presence.Client{UserID: 2}, 7)
	beat(presence.Client{Device: "kiosk-3"}, 7)
	beat(presence.Client{UserID: 2}, 7) // again: still one client
	if all, w, err := tr.Online(ctx, 7); err != nil || all != 3 || w != 2 {
		t.Fatalf("online %d, watching 7: %d, %v; want 3 and 2", all, w, err)
	}
	first := clk.now()
	clk.add(4 * time.Minute)
	beat(presence.Client{UserID: 1}, 0) // user 1 stays; the others' last beat was 4 min ago
	clk.add(2 * time.Minute)
	if all, w, err := tr.Online(ctx, 7); err != nil || all != 1 || w != 0 {
		t.Fatalf("6 min on: online %d, watching %d, %v; want only user 1", all, w, err)
	}
	if seen, on, err := tr.LastSeen(ctx, presence.Client{Device: "kiosk-3"}); err != nil || on || !seen.Equal(first.Truncate(time.Millisecond).UTC()) {
		t.Fatalf("the device: last seen %v, online %v, %v; want %v and offline", seen, on, err, first)
	}
	if _, on, _ := tr.LastSeen(ctx, presence.Client{UserID: 1}); !on {
		t.Fatal("user 1 beat 2 minutes ago and is not online")
	}
	beat(presence.Client{UserID: 9}, 0) // a heartbeat trims what expired
	if n := rdb.ZCard(ctx, rediskeys.PresenceAll).Val(); n != 2 {
		t.Fatalf("%d members left in the set, want 2: users 1 and 9", n)
	}
	if seen, on, err := tr.LastSeen(ctx, presence.Client{UserID: 404}); err != nil || on || !seen.IsZero() {
		t.Fatalf("a client never seen: %v, %v, %v", seen, on, err)
	}
}

// Without a user, a heartbeat needs a device id of a safe form.
func TestTracker_heartbeatWithoutAClient_isInvalid(t *testing.T) {
	tr := presence.New(testenv.StartRedis(t).Client(t), onSale{}, presence.Config{})
	defer tr.Close()
	for _, c := range []presence.Client{{}, {Device: "has space"}, {Device: strings.Repeat("x", 65)}, {UserID: -1}} {
		if err := tr.Heartbeat(context.Background(), c, 0); !errors.Is(err, presence.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
	}
	if err := tr.Heartbeat(context.Background(), presence.Client{UserID: 1}, -3); !errors.Is(err, presence.ErrInvalid) {
		t.Errorf("a negative activity: %v", err)
	}
}

// Only an activity on show may be watched: published and not yet ended,
// whether or not it has started. An unknown id or a draft is not found, a
// closed sale or one past its end has ended; a refused heartbeat writes
// nothing, not even the client's presence. 1,000 heartbeats naming
// made-up activities leave Redis without a key.
func TestTracker_heartbeatWatchingAnActivityNotOnShow_isRefusedAndWritesNothing(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	clk := newClock()
	now := clk.now()
	tr := presence.New(rdb, sales{
		1: {ID: 1, Status: activity.Published, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)}, // starts later
		2: {ID: 2, Status: activity.Published, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Minute)},  // selling
		3: {ID: 3, Status: activity.Draft, EndsAt: now.Add(time.Hour)},
		4: {ID: 4, Status: activity.Closed, EndsAt: now.Add(time.Hour)},
		5: {ID: 5, Status: activity.Published, StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)},
	}, presence.Config{Now: clk.now})
	defer tr.Close()
	for i := range 1000 {
		err := tr.Heartbeat(ctx, presence.Client{Device: fmt.Sprintf("made-up-%d", i)}, int64(1_000_000+i))
		if !errors.Is(err, activity.ErrNotFound) || refusal.Message(err, "") != fmt.Sprintf("activity %d not found", 1_000_000+i) {
			t.Fatalf("made-up activity %d: %v, want not found, naming it", 1_000_000+i, err)
		}
	}
	for act, want := range map[int64]error{3: activity.ErrNotFound, 4: activity.ErrEnded, 5: activity.ErrEnded} {
		if err := tr.Heartbeat(ctx, presence.Client{UserID: 1}, act); !errors.Is(err, want) {
			t.Errorf("activity %d: %v, want %v", act, err, want)
		}
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("refused heartbeats left %d keys: %v", len(keys), keys)
	}
	for _, act := range []int64{1, 2} {
		if err := tr.Heartbeat(ctx, presence.Client{UserID: act}, act); err != nil {
			t.Fatalf("activity %d on show: %v", act, err)
		}
	}
	if all, w, err := tr.Online(ctx, 2); err != nil || all != 2 || w != 1 {
		t.Fatalf("online %d, watching 2: %d, %v; want 2 and 1", all, w, err)
	}
	clk.add(time.Minute) // activity 2's end
	if err := tr.Heartbeat(ctx, presence.Client{UserID: 2}, 2); !errors.Is(err, activity.ErrEnded) {
		t.Fatalf("at its end: %v, want ended", err)
	}
}

// Without an activity reader no activity may be watched: the safe zero.
func TestTracker_withoutActivities_refusesEveryActivity(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	tr := presence.New(rdb, nil, presence.Config{})
	defer tr.Close()
	if err := tr.Heartbeat(context.Background(), presence.Client{UserID: 1}, 7); !errors.Is(err, activity.ErrNotFound) {
		t.Fatalf("%v, want not found", err)
	}
	if err := tr.Heartbeat(context.Background(), presence.Client{UserID: 1}, 0); err != nil {
		t.Fatalf("watching nothing: %v", err)
	}
}

// A crowd's heartbeats share writes: 2,000 at once cost far fewer ZADDs.
func TestTracker_concurrentHeartbeats_shareOneZADDPerBatch(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	tr := presence.New(rdb, onSale{}, presence.Config{})
	defer tr.Close()
	var wg sync.WaitGroup
	for u := range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tr.Heartbeat(ctx, presence.Client{UserID: int64(u + 1)}, 5); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	stats := rdb.Info(ctx, "commandstats").Val()
	calls := 0
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_zadd:calls="); ok {
			calls, _ = strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		}
	}
	if all, w, _ := tr.Online(ctx, 5); all != 2000 || w != 2000 || calls == 0 || calls > 400 {
		t.Fatalf("online %d, watching %d, after %d ZADD calls for 2,000 heartbeats (two sets each)", all, w, calls)
	}
	t.Logf("2,000 concurrent heartbeats: %d ZADD calls", calls)
}

// What a million clients online cost Redis, written by the tracker itself
// (concurrent Heartbeat calls, its batched ZADDs): first a million
// heartbeats watching nothing, which fill the set of everyone online; then
// the same million again watching one sale, which fill that sale's
// watching set and only rescore the first. used_memory before and after
// each step is what the step's set costs. docs/benchmarks.md ("Presence")
// quotes this test's figures; the bounds sit about 10% above them.
func TestPresence_memoryPerMillionOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("two million heartbeats")
	}
	const clients = 1_000_000
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	tr := presence.New(rdb, onSale{}, presence.Config{})
	defer tr.Close()
	perClient := func(act int64) float64 {
		t.Helper()
		before := testenv.UsedMemory(t, rdb)
		heartbeats(t, tr, clients, act)
		return float64(testenv.UsedMemory(t, rdb)-before) / clients
	}
	start := time.Now()
	all := perClient(0)
	watching := perClient(7)
	if n, w := rdb.ZCard(ctx, rediskeys.PresenceAll).Val(), rdb.ZCard(ctx, rediskeys.For(7).Watching).Val(); n != clients || w != clients {
		t.Fatalf("%d online and %d watching after %d clients' heartbeats", n, w, clients)
	}
	t.Logf("%d clients online, written through the tracker in %v: everyone online %.1f bytes each (%.1f MB a million), "+
		"watching a sale %.1f bytes each (%.1f MB a million)", clients, time.Since(start).Round(time.Second), all, all, watching, watching)
	// Measured 2026-11-24 (docs/benchmarks.md): 109.8 and 109.7 bytes.
	if all > 120 || watching > 120 || all < 50 || watching < 50 {
		t.Fatalf("%.1f and %.1f bytes per client online: outside 50-120, docs/benchmarks.md quotes 110", all, watching)
	}
}

// heartbeats sends n clients' heartbeats (users 10,000,000 on, 8-digit ids
// as a large shop's) watching act, 2,000 at a time as a crowd would: the
// tracker gathers them into batches.
func heartbeats(t *testing.T, tr *presence.Tracker, n int, act int64) {
	t.Helper()
	const conc = 2000
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += conc {
				if err := tr.Heartbeat(context.Background(), presence.Client{UserID: int64(10_000_000 + i)}, act); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d heartbeats failed", f, n)
	}
}
