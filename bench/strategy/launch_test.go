package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// The launch's rows, tiny, on stacks of real processes (one api, one
// worker, redis-server, mariadbd): a fresh-shopper pass with the worker
// stopped, then the whole system on a stack of its own with the worker
// persisting, 2 s of wrk each. Their figures must be there and sane —
// every answer 202, each user sent once and holding one unit, CPU per
// accepted order for every process that ran (the worker's only in the
// whole system) with the total their sum and wrk's apart, every order in
// MySQL afterwards — and the launch table must print them. About 45 s on a
// loaded 2-core machine, the build cached.
func TestLaunchRows_tinyRun_measureEveryProcessAndPersistEveryOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts a stack of processes")
	}
	ctx := context.Background()
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Env: []string{"RATE_LIMIT_IP_RPS=0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	o := options{duration: 2 * time.Second, conns: 8, threads: 2, users: 100, repeat: 1, freshRate: 20_000}
	b, err := openBench(o, stack)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	stack.Workers[0].Stop(15 * time.Second)

	api := stack.APIs[0]
	fresh := &row{key: "(f)", name: "fresh shoppers", base: stack.URL, server: api, ours: true, fresh: true}
	if err := b.throughput(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// Through a waiting room: every order carries its admission, and is
	// accepted (a missing or bad one would be 403 NOT_ADMITTED).
	room := &row{key: "(f)+room", name: "fresh shoppers admitted by a waiting room", base: stack.URL, server: api, ours: true, fresh: true, room: true}
	if err := b.throughput(ctx, room); err != nil {
		t.Fatal(err)
	}
	whole := &row{key: "(f)+worker", name: "the whole system", ours: true, fresh: true}
	if err := wholeSystem(ctx, o, root, whole, hookNone); err != nil {
		t.Fatal(err)
	}
	hooked := &row{key: "(f)+worker+hook+redis", name: "with a webhook endpoint, its deliveries on a Redis of their own", ours: true, fresh: true}
	if err := wholeSystem(ctx, o, root, hooked, hookOwnRedis); err != nil {
		t.Fatal(err)
	}
	if hooked.cpu[procHooksRedis] <= 0 {
		t.Fatalf("the deliveries' own Redis did nothing: %v", hooked.cpu)
	}
	// Its window lasted until the receiver had every order's event.
	if len(hooked.persisted) != 1 || hooked.persisted[0].delivered <= 0 || hooked.cpu[procWorker] <= 0 || hooked.codes["202"] < 100 {
		t.Fatalf("the hooked row: %+v, worker %.1f µs, answers %v", hooked.persisted, hooked.cpu[procWorker], hooked.codes)
	}
	if whole.persisted[0].delivered != 0 {
		t.Fatalf("the row with no endpoint waited for deliveries: %+v", whole.persisted[0])
	}

	for _, r := range []*row{fresh, room, whole} {
		accepted := r.codes["202"]
		if accepted < 100 || len(r.codes) != 1 || r.errors != 0 || r.rps <= 0 || r.p99 <= 0 {
			t.Fatalf("%s: answers %v, %d errors, %.0f orders/s, p99 %v: want only 202s", r.key, r.codes, r.errors, r.rps, r.p99)
		}
		// Sane: an order costs something in each process it goes through,
		// and less than a CPU-second.
		for _, name := range []string{procServer, procRedis, procWrk} {
			if v := r.cpu[name]; v <= 0 || v > 1e6 {
				t.Fatalf("%s: %s CPU %.1f µs an order (%v)", r.key, name, v, r.cpu)
			}
		}
		if _, ok := r.cpu[procMariaDB]; !ok {
			t.Fatalf("%s: no MariaDB figure (%v)", r.key, r.cpu)
		}
		sum := r.cpu[procServer] + r.cpu[procRedis] + r.cpu[procWorker] + r.cpu[procMariaDB]
		if r.total() != sum {
			t.Fatalf("%s: total %.1f, the processes' sum %.1f", r.key, r.total(), sum)
		}
	}
	// Limit 1 and every user new: the sale's users hold one unit each, as
	// many users as orders — give or take the requests in flight when wrk
	// stopped (one a connection at most), accepted but their answers not
	// counted.
	held, err := b.rdb.HGetAll(ctx, rediskeys.For(b.ours[0]).Users).Result()
	if err != nil {
		t.Fatal(err)
	}
	for user, units := range held {
		if id, _ := strconv.ParseInt(user, 10, 64); id < freshUsersFrom || units != "1" {
			t.Fatalf("(f): user %s holds %s units: want fresh users holding 1", user, units)
		}
	}
	if n, accepted := int64(len(held)), fresh.codes["202"]; n < accepted || n > accepted+int64(o.conns) {
		t.Fatalf("(f): %d orders answered 202, %d users hold a unit: want each order a user of its own", accepted, n)
	}
	if _, ok := fresh.cpu[procWorker]; ok {
		t.Fatalf("(f) ran with no worker, yet has a worker figure: %v", fresh.cpu)
	}
	if whole.cpu[procWorker] <= 0 || whole.cpu[procMariaDB] <= 0 {
		t.Fatalf("the whole system's worker and MariaDB did nothing: %v", whole.cpu)
	}
	if len(whole.persisted) != 1 {
		t.Fatalf("persistence of %d runs, want 1", len(whole.persisted))
	}
	p := whole.persisted[0]
	// wholeSystem checked MySQL holds every order; each has its lag.
	if n := int64(p.lag.N); n < whole.codes["202"] || n > whole.codes["202"]+int64(o.conns) || p.caughtUp <= 0 || p.outbox < 0 ||
		p.quiet < time.Second || len(p.idle) != len(serviceProcs) {
		t.Fatalf("persistence: %+v for %d orders: want each order's lag", p, whole.codes["202"])
	}

	// Redis's time by command: the accept's script in both rows, the
	// worker's reads in the whole system's only.
	for _, r := range []*row{fresh, whole} {
		if c := r.byCommand["evalsha"]; c.calls <= 0 || c.us <= 0 {
			t.Fatalf("%s: Redis ran no script for its orders: %+v", r.key, r.byCommand)
		}
	}
	if fresh.byCommand["hmget"].calls >= whole.byCommand["hmget"].calls {
		t.Fatalf("HMGETs an order: (f) %.2f, the whole system %.2f: want the worker's reads on top",
			fresh.byCommand["hmget"].calls, whole.byCommand["hmget"].calls)
	}

	var out strings.Builder
	printLaunch(&out, o, []*row{fresh, room, whole, hooked})
	printByCommand(&out, []*row{fresh, room, whole, hooked})
	for _, want := range []string{"| (f) fresh shoppers |", "| (f)+room fresh shoppers admitted by a waiting room |", "(f)+room, every order with its admission", "| (f)+worker the whole system |", "(f)+worker run 1: when the load ended the outbox held",
		"the receiver had every order's order.accepted", "one webhook endpoint subscribed to every event", "Redis by command, per accepted order", "| evalsha |"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the launch table has no %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// Fresh shoppers are each their own user, above the rotating users and
// below 2^31, and spread: not numbered in the order they come.
func TestFreshUser_distinctAndScattered(t *testing.T) {
	const n = 1 << 20
	seen := make(map[int64]bool, n)
	inOrder := 0
	for k := int64(0); k < n; k++ {
		id := freshUser(k)
		if id < freshUsersFrom || id >= 1<<31 {
			t.Fatalf("shopper %d is user %d: want [%d, 2^31)", k, id, freshUsersFrom)
		}
		if seen[id] {
			t.Fatalf("shopper %d is user %d, an earlier shopper's", k, id)
		}
		seen[id] = true
		if k > 0 && id > freshUser(k-1) {
			inOrder++
		}
	}
	if inOrder > n*6/10 || inOrder < n*4/10 {
		t.Fatalf("%d of %d shoppers' ids above the one before: want about half (scattered)", inOrder, n)
	}
}
