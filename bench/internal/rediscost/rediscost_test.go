package rediscost

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The tool itself on a few orders: every phase that talks to Redis is
// measured as costing it something (a phase wired to nothing would read 0),
// the worker persisted every order (Run waits for MySQL to hold them), and
// the table has a row per phase and a total.
// With -hold-user-lock the lock's obtain is in the one phase with the
// accept (Orders.Accept takes it); by default it is elided when free.
// By default with a phase of refused orders too: out of the total, and no
// refused order read back on its own (the resend check is place.lua's).
func TestRun_fewOrders_everyPhaseCostsRedisSomething(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(map[bool]string{false: "deferred", true: "held"}[hold], func(t *testing.T) {
			refused := map[bool]int{false: 300}[hold]
			phases := runFew(t, Options{Orders: 600, Conc: 8, HoldUserLock: hold, ByCommand: !hold, Refused: refused}, map[bool][]string{
				false: {"rate limit + lock + accept", "relay", "worker", "refused: over the rate limit"},
				true:  {"lock, rate limit + accept + release", "relay", "worker"},
			}[hold])
			var sum time.Duration
			for _, p := range phases {
				if !p.Refused {
					sum += p.PerOrder()
				}
			}
			if got := Total(phases); got != sum || got <= 0 {
				t.Errorf("Total %v, the accepted phases sum to %v", got, sum)
			}
			if refused == 0 {
				return
			}
			r := phases[len(phases)-1]
			// A second or so of one user's orders: all but a few refused.
			if !r.Refused || r.Orders < refused-10 || r.Orders > refused {
				t.Fatalf("refused phase: %+v", r)
			}
			// No read of its own per refused order: place.lua looked for
			// the number's own order before the rate limit. The worker
			// process, still up, may run a few HGETs of its own.
			n := int64(r.Orders)
			if hget := r.ByCommand["hget"].Calls; hget > 20 {
				t.Errorf("%d refused orders ran %d HGET, want none of their own", n, hget)
			}
			if runs := r.ByCommand["evalsha"].Calls; runs <= 0 || runs >= n {
				t.Errorf("%d refused orders ran %d scripts, want fewer (merged) and some", n, runs)
			}
		})
	}
}

// With -items the accept is measured at a sale of items too, right after
// the sale of one's, and left out of the total like the refused phase.
func TestRun_items_theAcceptBesideOutOfTheTotal(t *testing.T) {
	phases := runFew(t, Options{Orders: 600, Conc: 8, Items: 3}, []string{
		"rate limit + lock + accept", "rate limit + lock + accept, a sale of 3 items", "relay", "worker"})
	if !phases[1].Beside || phases[0].Beside || phases[1].Orders != 600 || phases[0].Orders != 600 {
		t.Fatalf("the accepts: %+v, %+v", phases[0], phases[1])
	}
	if got, want := Total(phases), phases[0].PerOrder()+phases[2].PerOrder()+phases[3].PerOrder(); got != want {
		t.Errorf("Total %v, the sale of one item's phases sum to %v", got, want)
	}
}

func runFew(t *testing.T, o Options, want []string) []Phase {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	phases, err := Run(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != len(want) {
		t.Fatalf("%d phases, want %v", len(phases), want)
	}
	for i, p := range phases {
		if p.Name != want[i] {
			t.Errorf("phase %d is %q, want %q", i, p.Name, want[i])
		}
		if p.CPU <= 0 || p.Commands <= 0 {
			t.Errorf("%s: %v of Redis CPU, %d commands: not measured", p.Name, p.CPU, p.Commands)
		}
		// Every phase runs scripts (ours, or asynq's), and its commands by
		// name add up to its count.
		var sum int64
		for _, st := range p.ByCommand {
			sum += st.Calls
		}
		if st := p.ByCommand["evalsha"]; st.Calls <= 0 || st.Usec <= 0 || sum != p.Commands {
			t.Errorf("%s: EVALSHA %+v, %d commands by name, %d in all", p.Name, st, sum, p.Commands)
		}
	}
	var out strings.Builder
	Print(&out, o, phases)
	table, byCommand, _ := strings.Cut(out.String(), ", by command")
	if !strings.Contains(table, "| **total** |") || strings.Count(table, "\n| ") != len(want)+2 {
		t.Errorf("table:\n%s", out.String())
	}
	if o.ByCommand != (strings.Count(out.String(), "| evalsha |") == len(want)) || o.ByCommand != (byCommand != "") {
		t.Errorf("-by-command %v, and the output:\n%s", o.ByCommand, out.String())
	}
	return phases
}
