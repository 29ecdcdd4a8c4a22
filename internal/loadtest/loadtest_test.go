package loadtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

// The kit end to end, small: 3 api processes behind nginx, 2 workers,
// redis-server and mariadbd, wrk with rotating users until the sale sells
// out, one user's ab burst, a crowd in front of a sale with a waiting room
// (half streaming through nginx, half polling), then persistence and every
// invariant; with heartbeats, their cost measured alone first and during
// the run.
func TestRun_localStack_sellsOutAndKeepsEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts a dozen processes")
	}
	var progress []string
	rep, err := loadtest.Run(context.Background(), loadtest.Config{
		Users: 3000, Stock: 800, Limit: 2, Duration: 4 * time.Second, Conns: 32, Threads: 2,
		ABRequests: 500, ABConns: 20, PersistTimeout: time.Minute, HeartbeatEvery: 20 * time.Second,
		HeartbeatCostWindow: time.Second,
		Crowd:               400, CrowdStream: 0.5, CrowdAdmit: 100, CrowdStock: 200, CrowdStartsIn: 2 * time.Second,
		Log: func(f string, args ...any) { progress = append(progress, f) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep)
	if !rep.OK() {
		t.Fatal("an invariant broke or an order was not persisted")
	}
	if len(rep.Phases) != 3 || len(rep.Invariants) != 3 {
		t.Fatalf("phases %d, invariant reports %d: want 3 and 3", len(rep.Phases), len(rep.Invariants))
	}
	wrk := rep.Phases[0].Result
	if wrk.Codes["202"] != 800 || wrk.Codes["409 SOLD_OUT"] == 0 || wrk.Errors != 0 {
		t.Fatalf("wrk answers %v, %d errors: want exactly 800 accepted, then SOLD_OUT, no errors", wrk.Codes, wrk.Errors)
	}
	if wrk.RPS() <= 0 || wrk.P99 <= 0 || wrk.P99 < wrk.P50 {
		t.Fatalf("wrk figures: %.0f rps, p50 %v, p99 %v", wrk.RPS(), wrk.P50, wrk.P99)
	}
	ab := rep.Phases[1].Result
	if ab.Requests != 500 || ab.Codes["2xx"] != 2 {
		t.Fatalf("ab: %d requests, answers %v: one user gets exactly their limit of 2", ab.Requests, ab.Codes)
	}
	// The crowd: 400 new shoppers, the first half before the start, for 200
	// units: 200 admitted (the business cap lets in no more than can be
	// sold while they order at once), each ordering once with its admission
	// and 100 of them refused first without it; the rest told sold out.
	c := rep.Crowd
	if c == nil || len(c.Problems()) > 0 || c.Joined != 400 || c.Streamed != 200 || c.Polls == 0 {
		t.Fatalf("crowd: %+v, problems %v", c, c.Problems())
	}
	if c.Orders["202"] != 200 || c.Admitted < 200 || c.Admitted > 220 || c.SoldOut != 400-c.Admitted || c.StillWaiting != 0 {
		t.Fatalf("crowd: admitted %d, orders %v, sold out %d, still waiting %d", c.Admitted, c.Orders, c.SoldOut, c.StillWaiting)
	}
	if c.NoTokenRefused != 100 || c.NoTokenAccepted != 0 {
		t.Fatalf("crowd: orders without an admission: %d refused, %d accepted", c.NoTokenRefused, c.NoTokenAccepted)
	}
	// Rates and delays are benchmarks' to judge; here they are only read.
	if c.AdmitRate <= 0 || c.WaitP99 <= 0 || c.OrderEvents == 0 || c.OrderEventP99 <= 0 {
		t.Fatalf("crowd figures: %+v", c)
	}
	if rep.Lag.N != 800 || rep.Lag.P99 <= 0 {
		t.Fatalf("persistence lag over %d orders, p99 %v", rep.Lag.N, rep.Lag.P99)
	}
	for _, name := range []string{"api1", "api2", "api3", "worker1", "worker2"} {
		if rep.PeakRSS[name] <= 0 {
			t.Fatalf("no peak RSS for %s: %v", name, rep.PeakRSS)
		}
	}
	// 3,000 users every 20 s: 150 heartbeats a second, for the 1 s cost
	// window and the 4 s of wrk, fewer than the users, and the wrk run's go
	// on from the window's users: each heartbeat is a new client online.
	hb, cost := rep.Heartbeats, rep.HeartbeatCost
	if hb == nil || hb.Requests < 300 || hb.Requests >= 3000 || hb.Codes["200"] != hb.Requests || hb.Errors != 0 {
		t.Fatalf("heartbeats: %+v", hb)
	}
	// (150 heartbeats are too few to tell their cost from the idle stack's
	// reliably: the figures are only checked for being read.)
	if cost == nil || cost.Heartbeats.Codes["200"] < 50 || cost.Busy.Redis <= 0 || cost.Idle.Redis <= 0 || cost.Idle.Seconds < 0.9 ||
		cost.RedisPerHeartbeat() > 10*time.Millisecond {
		t.Fatalf("heartbeat cost: %+v, Redis %v a heartbeat", cost, cost.RedisPerHeartbeat())
	}
	if online := cost.Heartbeats.Codes["200"] + hb.Codes["200"]; rep.PresenceOnline != online || rep.PresenceBytes <= 0 {
		t.Fatalf("presence after %d heartbeats of distinct users: %d online in %d bytes", online, rep.PresenceOnline, rep.PresenceBytes)
	}
	if c := rep.WrkCPU; c == nil || c.Redis <= 0 || c.APIs <= 0 || c.Seconds < 4 {
		t.Fatalf("CPU over the wrk run: %+v", c)
	}
	if out := rep.String(); !strings.Contains(out, "verdict: PASS") || !strings.Contains(out, "3 api behind nginx") ||
		!strings.Contains(out, "presence heartbeats during the wrk run") || !strings.Contains(out, "cost of a heartbeat") ||
		!strings.Contains(out, "CPU over the wrk run") || !strings.Contains(out, "a crowd of 400 in a waiting room") {
		t.Fatalf("report:\n%s", out)
	}
}

// The kit's failover run, short: a primary, a replica and three sentinels
// under api and worker processes acknowledging every change; wrk orders
// with rotating users and the primary is killed -9 three seconds in. The
// report says when the sentinels promoted the replica, when the first
// order after the kill was accepted and how many 503s the probe saw on the
// way, and every invariant holds with every accepted order in MySQL. About
// 30 s on a loaded 2-core machine, the build cached.
func TestRun_sentinelFailover_primaryKilled_reportsItAndKeepsEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and starts a dozen processes")
	}
	start := time.Now()
	rep, err := loadtest.Run(context.Background(), loadtest.Config{
		Sentinel: true, KillPrimaryAfter: 3 * time.Second, APIs: 1, Workers: 1,
		// A request waits at most a second: less than the sentinels take
		// to judge the primary down (down-after 2 s), so requests sent
		// during the failover surely end in 503s, which the report counts.
		Env:   []string{"REQUEST_TIMEOUT=1s"},
		Users: 2000, Stock: 100_000, Limit: 1, Duration: 12 * time.Second, Conns: 16, Threads: 1,
		PersistTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in %v:\n%s", time.Since(start).Round(time.Second), rep)
	if !rep.OK() {
		t.Fatal("an invariant broke or an order was not persisted")
	}
	f := rep.Failover
	if f == nil {
		t.Fatal("no failover in the report")
	}
	if f.Old == "" || f.Promoted == "" || f.Old == f.Promoted {
		t.Fatalf("failover from %q to %q", f.Old, f.Promoted)
	}
	// The sentinels judge the primary down after a second (testenv) and
	// promote within a few more; sales resume once the old primary is back
	// as a replica (acknowledged writes need one). The promotion is seen
	// by polling the sentinels every 50 ms, and the api may hear of it
	// first: the first 202 may come up to a poll before the promotion is
	// seen. (Until 2026-11-25 Resumed was the request's sending, which
	// could be before the promotion: a flaky failure at 2.201 s against
	// 2.208 s.)
	if f.PromotedAfter <= 0 || f.PromotedAfter > 30*time.Second || f.Resumed < f.PromotedAfter-100*time.Millisecond || f.Resumed > 60*time.Second {
		t.Fatalf("promoted %v after the kill, the first order accepted %v after it", f.PromotedAfter, f.Resumed)
	}
	if f.ProbeOrders == 0 || f.Probe503s == 0 || f.ProbeSlowest <= 0 {
		t.Fatalf("the probe placed %d orders, saw %d answers 503, slowest %v: want orders and 503s", f.ProbeOrders, f.Probe503s, f.ProbeSlowest)
	}
	wrk := rep.Phases[0].Result
	if wrk.Codes["202"] == 0 || wrk.Codes["503 UNAVAILABLE"] == 0 {
		t.Fatalf("wrk answers %v: want orders accepted and 503s during the failover", wrk.Codes)
	}
	if out := rep.String(); !strings.Contains(out, "verdict: PASS") || !strings.Contains(out, "failover: primary "+f.Old+" killed -9") {
		t.Fatalf("report:\n%s", out)
	}
}
