package soak_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/soak"
)

// The soak, short, in the default topology: 55 s of shoppers on four flash
// sales (one in shards, one of three items, restocked and paused while it
// sells, one behind a waiting room) and two group buys against 2 apis
// behind nginx, 2 workers, a Redis
// primary with a replica and three sentinels, and mariadbd, a fault every
// ~4 s (so each kind — an api and a worker killed with -9, Redis paused,
// MariaDB stopped, the Redis primary killed -9 and failed over — strikes at
// least once), then every invariant once settled. Any broken invariant
// fails it, with the seed to replay.
func TestSoak_short_everyFaultKind_everyInvariantHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries, starts a stack of processes and runs for 55 s of load, then settles")
	}
	rep := runSoak(t, soak.Options{Duration: 55 * time.Second, FaultEvery: 4 * time.Second, Clients: 16})
	kinds := soak.KindsFor(soak.Options{})
	if len(kinds) != len(soak.Kinds) {
		t.Errorf("the default soak injects %v, not every kind %v", kinds, soak.Kinds)
	}
	for _, kind := range kinds {
		if rep.FaultsByKind()[kind] == 0 {
			t.Errorf("no %q fault in %d faults", kind, len(rep.Faults))
		}
	}
	// The run did what it is for: orders went every way, groups both ways,
	// and the mid-run checks ran through the faults.
	if rep.Accepted < 200 || rep.Paid == 0 || rep.Cancelled == 0 || rep.Expired == 0 || rep.Refunded == 0 {
		t.Errorf("orders: %d accepted, %d paid, %d cancelled, %d expired, %d refunded; want 200+ and each outcome",
			rep.Accepted, rep.Paid, rep.Cancelled, rep.Expired, rep.Refunded)
	}
	if rep.GroupsSucceeded == 0 || rep.GroupsFailed == 0 {
		t.Errorf("groups: %d succeeded, %d failed; want some of each", rep.GroupsSucceeded, rep.GroupsFailed)
	}
	// Money moved both ways: payments confirmed by webhooks, and late or
	// failed groups' money given back.
	var confirmed, refunds int64
	for _, inv := range rep.Invariants {
		confirmed, refunds = confirmed+inv.Money.Confirmed, refunds+inv.Money.Refunds
	}
	if confirmed == 0 || refunds == 0 {
		t.Errorf("money: %d payments confirmed, %d refunds; want some of each", confirmed, refunds)
	}
	// Several group buys at once, each with groups the final checks settled.
	groupBuys := 0
	for _, inv := range rep.Invariants {
		if inv.Scope == "settled" && inv.Groups["succeeded"]+inv.Groups["failed"] > 0 {
			groupBuys++
		}
	}
	if groupBuys < 2 {
		t.Errorf("%d group buys with settled groups checked; want 2+ (two on sale at once)", groupBuys)
	}
	// The sale of items was restocked, had unsold units removed and was
	// paused while it sold, through the faults.
	if st := rep.Stock; st.Restocked == 0 || st.Paused == 0 || st.Removed+st.RemovalsRefused == 0 {
		t.Errorf("the sale of items: %+v; want restocks, removals and pauses", st)
	}
	// The sale behind a waiting room let its shoppers in, on the stream and
	// by polling, and they ordered with their admissions; those who ordered
	// without one were refused (one accepted is a failure of its own).
	if rc := rep.Room; rc.Streamed == 0 || rc.Polled == 0 || rc.Admitted == 0 || rc.Accepted == 0 || rc.NotAdmitted == 0 {
		t.Errorf("the sale behind a waiting room: %+v; want waits on the stream and by polling, admissions, orders accepted and tokenless ones refused", rc)
	}
	if rep.LiveRounds < 40 {
		t.Errorf("%d mid-run sale snapshots checked; want 40+ (4 sales every 3 s)", rep.LiveRounds)
	}
}
