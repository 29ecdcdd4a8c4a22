package soak_test

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashsale/flashsale/internal/soak"
)

// The network's faults, short, in the default topology on a network whose
// every link is a toxiproxy proxy: every kind once (the first faults deal
// one of each) — an api cut from the Redis primary, its replies from it
// lost, a split brain, a worker cut from MariaDB and from Redis, the
// replication link cut, latency and a bandwidth limit on every link,
// connections reset, Redis replies cut in half —
// with the shoppers buying throughout; then every invariant, every answer
// within REQUEST_TIMEOUT and its margin, recovery by itself within
// soak.RecoverWithin of each heal, and the flash sales' histories checked
// by porcupine. Each kind alone and longer: make test-network.
func TestSoak_network_everyKindOnce_everyInvariantHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries, starts a stack of processes on a toxiproxy network and runs for 100 s of load")
	}
	rep := runSoak(t, soak.Options{Duration: 100 * time.Second, FaultEvery: 2 * time.Second, Clients: 12, NetFaultFor: 5 * time.Second,
		Network: true, Only: soak.NetworkKinds})
	for _, kind := range soak.NetworkKinds {
		if rep.FaultsByKind()[kind] == 0 {
			t.Errorf("no %q fault in %d faults", kind, len(rep.Faults))
		}
	}
	if rep.Accepted < 100 || rep.Paid == 0 {
		t.Errorf("orders: %d accepted, %d paid; want 100+ and some paid", rep.Accepted, rep.Paid)
	}
}

// runSoak runs a soak and fails the test on anything it found; porcupine
// must find no flash sale's history illegal, and decide two or more.
func runSoak(t *testing.T, o soak.Options) *soak.Report {
	t.Helper()
	o.Log = func(f string, args ...any) { t.Logf(f, args...) }
	rep, err := soak.Run(context.Background(), o)
	if rep != nil {
		t.Logf("\n%s", rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("an invariant or a promise broke (seed %d): %d failures", rep.Seed, len(rep.Failures))
	}
	if len(rep.Linear) < 2 {
		t.Errorf("%d flash sales' histories checked; want 2+", len(rep.Linear))
	}
	// An Illegal history already failed rep.OK. An Unknown one is not shown
	// either way: porcupine's search is exponential at worst, and some
	// histories (1,931 operations around a sell-out with an api killed
	// three times, in one CI run) are not decided in the minute each sale
	// gets, while most take milliseconds. So: logged, and two sales must be
	// decided Ok.
	ok := 0
	for _, l := range rep.Linear {
		switch l.Result {
		case porcupine.Ok:
			ok++
		case porcupine.Unknown:
			t.Logf("porcupine undecided: %s", l)
		default:
			t.Errorf("porcupine: %s", l)
		}
	}
	if ok < 2 {
		t.Errorf("%d flash sales' histories decided linearizable; want 2+", ok)
	}
	for _, f := range rep.Faults {
		if f.Kind != "" && f.Recovered > soak.RecoverWithin {
			t.Errorf("%s: recovered %v after the heal, past %v", f, f.Recovered, soak.RecoverWithin)
		}
	}
	return rep
}
