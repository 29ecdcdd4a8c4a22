package invariants_test

import (
	"testing"

	"github.com/flashsale/flashsale/internal/invariants"
)

// The webhooks' checks pass a receiver that got every event, some twice
// under their id, and fail each way a delivery can go wrong.
func TestWebhooks_eachWayWrong_failsItsCheck(t *testing.T) {
	ev := func(id, typ, subj string, seq int64) invariants.OutboxEvent {
		return invariants.OutboxEvent{ID: id, Type: typ, Subject: subj, Sequence: seq, BodySHA: invariants.BodySHA([]byte(id))}
	}
	outbox := []invariants.OutboxEvent{ev("evt_1", "order.accepted", "42-A", 1), ev("evt_2", "order.paid", "42-A", 2),
		ev("evt_3", "activity.paused", "42", 7), ev("evt_4", "activity.resumed", "42", 9)}
	recv := func(es ...invariants.OutboxEvent) []invariants.Received {
		var out []invariants.Received
		for _, e := range es {
			out = append(out, invariants.Received{ID: e.ID, Type: e.Type, Subject: e.Subject, Sequence: e.Sequence, BodySHA: e.BodySHA})
		}
		return out
	}
	good := recv(outbox[0], outbox[1], outbox[1], outbox[2], outbox[3]) // evt_2 twice: a retry of its id
	if rep := invariants.Webhooks(outbox, good); !rep.OK() {
		t.Fatalf("all delivered, one retried: %+v", rep.Checks)
	}
	invented := ev("evt_9", "order.refunded", "42-A", 3)
	changed := outbox[1]
	changed.BodySHA = "00"
	twoIDs := outbox[1]
	twoIDs.ID = "evt_2b"
	for name, tc := range map[string]struct {
		outbox   []invariants.OutboxEvent
		received []invariants.Received
		check    string
	}{
		"one never received": {outbox, recv(outbox[0], outbox[2], outbox[3]), "every outbox event delivered"},
		"one invented":       {outbox, append(recv(outbox...), recv(invented)...), "none received that was not appended (none invented)"},
		"a changed body":     {outbox, append(recv(outbox...), recv(changed)...), "none received that was not appended (none invented)"},
		"one event, two ids": {append(outbox, twoIDs), append(recv(outbox...), recv(twoIDs)...), "duplicates only as repeats of one webhook-id"},
		"an order's gap":     {[]invariants.OutboxEvent{outbox[1]}, recv(outbox[1]), "each subject's sequence complete"},
	} {
		failed := false
		for _, c := range invariants.Webhooks(tc.outbox, tc.received).Checks {
			failed = failed || (c.Name == tc.check && !c.OK)
		}
		if !failed {
			t.Errorf("%s: %q passed", name, tc.check)
		}
	}
}
