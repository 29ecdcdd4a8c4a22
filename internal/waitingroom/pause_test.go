package waitingroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/waitingroom"
)

// A paused sale admits no one: its serving counter stands (and banks no
// time), a waiting shopper's place has no estimate, on the fast path and
// through queue.lua alike; resumed, admission goes on at its rate, not in
// a burst of the time paused.
func TestPause_admissionStands_noBurstOnResume(t *testing.T) {
	a := roomSale(1, 1000, 100, time.Now().Add(-time.Second))
	f := setup(t, a)
	ctx := context.Background()
	for u := int64(1); u <= 500; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	load := func(paused bool) {
		t.Helper()
		a.Paused = paused
		a.Version++
		if _, err := f.sh.Stock.Load(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	serving := func() int64 {
		t.Helper()
		c, err := f.svc.Counters(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		return c.Serving
	}
	load(true)
	before := serving()
	time.Sleep(time.Second) // 100 admissions' worth at 100 a second
	if after := serving(); after != before {
		t.Fatalf("paused: the counter moved from %d to %d", before, after)
	}
	for _, fast := range []bool{false, true} {
		f.svc.SetFastRead(fast)
		time.Sleep(20 * time.Millisecond) // past the fast path's 10 ms freshness, either way
		p, err := f.svc.Read(ctx, 1, 400)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != waitingroom.Waiting || p.EstimatedWait != -1 || p.Position <= 0 {
			t.Fatalf("paused, fast path %v: %+v; want waiting, no estimate", fast, p)
		}
	}
	load(false)
	t0 := time.Now()
	resumed := serving()
	time.Sleep(200 * time.Millisecond)
	moved, elapsed := serving()-resumed, time.Since(t0)
	// At 100 a second over the time between the reads (a loaded machine's
	// sleep may run long): a burst of the second paused would add 100.
	if want := 100 * elapsed.Seconds(); float64(moved) < want/2 || float64(moved) > want+20 {
		t.Fatalf("resumed: %d admitted in %v at 100 a second; want about %.0f, not the paused second's 100 in a burst", moved, elapsed, want)
	}
	if resumed-before > 5 {
		t.Fatalf("the resume itself admitted %d", resumed-before)
	}
	// Paused again, and nobody reads while it is: the resume's load moves
	// the counter as it ran (not at all), so the pause is banked nowhere.
	load(true)
	before = serving()
	time.Sleep(time.Second)
	load(false)
	if resumed := serving(); resumed-before > 5 {
		t.Fatalf("a pause nobody read: the resume admitted %d at once (the paused second's worth is 100)", resumed-before)
	}
}
