package payment_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A confirmation that pays its order is five round trips to Redis — the
// order's read (read_order.lua), the payment's save (save_payment.lua), the
// order's lock, transition.lua, the release — and nothing else: no event
// mark, no read after the transition, no record task (the order's sync
// records the payment). Its replay is two: the order's read and the
// payment's. Before 2026-11-29 a confirmation was ten round trips
// (docs/benchmarks.md, "Confirmations in five round trips"). Counted by a
// hook on the client every part shares, after a first confirmation loaded
// the scripts.
func TestService_confirmation_fiveRoundTrips_replayTwo(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	trips := &roundTrips{}
	e.sh.RDB.(*redis.Client).AddHook(trips)
	confirm := func(user int64, evt string) string {
		t.Helper()
		o, pid := e.paying(t, 51, user)
		trips.reset()
		if err := e.succeeded(t, evt, pid, o.No, o.AmountCents); err != nil {
			t.Fatal(err)
		}
		return o.No
	}
	confirm(1, "evt_warm") // loads the scripts
	no := confirm(2, "evt_1")
	if got := trips.String(); got != "evalsha evalsha evalsha evalsha evalsha" {
		t.Errorf("one confirmation's round trips: %q; want five, each one EVALSHA", got)
	}
	o, err := e.orders.Get(ctx, no, 0)
	if err != nil || o.Status != "paid" {
		t.Fatalf("the order after its confirmation: %+v, %v", o, err)
	}
	trips.reset()
	if err := e.succeeded(t, "evt_1", o.PaymentID, no, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if got := trips.String(); got != "evalsha hget" {
		t.Errorf("its replay's round trips: %q; want the order's read and the payment's", got)
	}
}

// roundTrips is a go-redis hook that notes every round trip: a command
// sent alone, or a pipeline (its commands joined by '+').
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = nil
}

func (r *roundTrips) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.trips, " ")
}

func (r *roundTrips) note(cmds []redis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, strings.Join(names, "+"))
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.note([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.note(cmds)
		return next(ctx, cmds)
	}
}
