package waitingroom_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// The estimate is from the measured admission rate (issue 42: "steady:
// from the measured admission rate, not a jumpy guess"): a queue stalled by
// the business cap (5 units, none ordered: 6 admitted, then nobody) measures
// its rate falling, smoothly (a 30 s time constant), and its waiting
// shoppers' estimates grow with it, on the fast path and through queue.lua
// alike; a lowered rate tells at once; a pause and an empty queue measure
// nothing.
func TestEstimate_followsTheMeasuredRate(t *testing.T) {
	a := roomSale(1, 5, 100, time.Now().Add(-time.Second))
	empty := roomSale(2, 100, 100, time.Now().Add(-time.Second))
	f := setup(t, a, empty)
	ctx := context.Background()
	for u := int64(1); u <= 100; u++ {
		if _, err := f.svc.Join(ctx, 1, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	for u := int64(1); u <= 3; u++ {
		if _, err := f.svc.Join(ctx, 2, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	measured := func(sale int64) float64 {
		t.Helper()
		v, err := f.rdb.HGet(ctx, rediskeys.For(sale).Meta, "wr_mr").Float64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	place := func(fast bool) waitingroom.Place {
		t.Helper()
		f.svc.SetFastRead(fast)
		time.Sleep(figuresAge)
		p, err := f.svc.Read(ctx, 1, 100)
		if err != nil || p.Status != waitingroom.Waiting {
			t.Fatalf("the last in line: %+v, %v", p, err)
		}
		return p
	}
	time.Sleep(100 * time.Millisecond) // the 6 admitted at 100 a second
	first := place(false)
	if first.Position != 94 { // 6 admitted: 5 left and a tenth's margin
		t.Fatalf("the last in line at %d; want 94", first.Position)
	}
	// Stalled for 3 s, read every 50 ms as a crowd would.
	t0 := time.Now()
	for time.Since(t0) < 3*time.Second {
		if _, err := f.svc.Counters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Counters(ctx, 2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stalled := time.Since(t0).Seconds()
	mr := measured(1)
	// From 100 a second, e^(-t/30) of it left after t s of none admitted
	// (a little more stall before t0; less if a slow machine's reads came
	// late — the step's length counts, not the reads).
	if want := 100 * math.Exp(-stalled/30); mr > want+1 || mr < want-4 {
		t.Fatalf("after %.1f s stalled the measured rate is %.2f; want about %.1f", stalled, mr, want)
	}
	for _, fast := range []bool{false, true} {
		p := place(fast)
		want := time.Duration(94 / measured(1) * float64(time.Second))
		if p.Position != 94 || (p.EstimatedWait-want).Abs() > 20*time.Millisecond || p.EstimatedWait <= first.EstimatedWait {
			t.Fatalf("fast path %v: stalled, %+v; want position 94 and about %v (more than the first %v)", fast, p, want, first.EstimatedWait)
		}
	}
	// Nobody was waiting in sale 2: nothing measured, the rate set stands.
	if mr, err := f.rdb.HGet(ctx, rediskeys.For(2).Meta, "wr_mr").Result(); err == nil {
		t.Fatalf("an empty queue measured a rate: %s", mr)
	}
	// Paused: measured as it was when the pause was loaded (the load
	// advances the counter to then, measuring the stall up to it).
	a.Paused, a.Version = true, 2
	if _, err := f.sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	before := measured(1)
	for range 10 {
		if _, err := f.svc.Counters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := measured(1); after != before {
		t.Fatalf("paused, the measured rate went from %v to %v", before, after)
	}
	// A lowered rate tells at once: 10 a second is below the measured.
	a.Paused, a.AdmitPerSecond, a.Version = false, 10, 3
	if _, err := f.sh.Stock.Load(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, fast := range []bool{false, true} {
		if p := place(fast); p.EstimatedWait != 9400*time.Millisecond {
			t.Fatalf("fast path %v: at 10 a second, %+v; want 9.4 s", fast, p)
		}
	}
}
