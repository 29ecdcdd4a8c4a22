package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/invariants"
)

// Report is what a soak did and found.
type Report struct {
	Seed   int64
	Load   time.Duration // from the start (stack included) until the load stopped and the faults healed
	Settle time.Duration // from then until quiet
	Total  time.Duration
	Sales  []string // every sale, as put on sale
	Faults []Fault

	// The shoppers' orders (distinct orders a 202 named) and how they ended:
	// paid, cancelled by the shopper, cancelled otherwise (timed out, or
	// unpaid in a group that failed), refunded (paid in a group that failed).
	Accepted, Paid, Cancelled, Expired, Refunded int64
	GroupsSucceeded, GroupsFailed                int64
	Answers                                      map[string]int64 // what the shoppers were answered, retries included
	Stock                                        StockChanges     // the admin's restocks and pauses of the sales of items
	Room                                         RoomCounts       // the sales behind a waiting room (room.go)
	// The shop's webhooks (hooks.go): events in the outbox at the end, and
	// deliveries the receiver accepted (duplicates included).
	WebhookEvents, WebhookDeliveries int

	Late        int64 // tries answered (or given up on) past AnswerWithin; each a failure
	LiveRounds  int   // sales checked mid-run
	LiveSkipped int   // mid-run checks skipped: Redis did not answer (paused)
	Checks      int   // single checks run, mid-run and at the end
	Invariants  []invariants.Report
	Linear      []LinearResult // each flash sale's history, checked by porcupine
	Failures    []string       // every broken invariant or promise, with its evidence
	Logs        string         // a failed run's process logs, kept here
}

// OK tells whether every check passed (and the final ones ran).
func (r *Report) OK() bool { return len(r.Failures) == 0 && len(r.Invariants) > 0 }

// FaultsByKind counts the faults of each kind.
func (r *Report) FaultsByKind() map[string]int {
	out := map[string]int{}
	for _, f := range r.Faults {
		out[f.Kind]++
	}
	return out
}

// String is the report for people.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flashsale fault soak, seed %d: load %v, settled %v later, %v in all\n",
		r.Seed, r.Load.Round(100*time.Millisecond), r.Settle.Round(100*time.Millisecond), r.Total.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "\nsales (%d):\n", len(r.Sales))
	for _, s := range r.Sales {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	by := r.FaultsByKind()
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, by[k]))
	}
	for _, k := range NetworkKinds {
		if by[k] > 0 {
			kinds = append(kinds, fmt.Sprintf("%s ×%d", k, by[k]))
		}
	}
	fmt.Fprintf(&b, "\nfaults (%d): %s\n", len(r.Faults), strings.Join(kinds, ", "))
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "\norders the shoppers saw accepted: %d — paid %d, cancelled by the shopper %d, timed out or cancelled with their group %d, refunded %d\n",
		r.Accepted, r.Paid, r.Cancelled, r.Expired, r.Refunded)
	fmt.Fprintf(&b, "groups: %d succeeded, %d failed\n", r.GroupsSucceeded, r.GroupsFailed)
	fmt.Fprintf(&b, "webhooks: %d outbox events, %d deliveries received by the receiver (every one checked against the outbox)\n",
		r.WebhookEvents, r.WebhookDeliveries)
	fmt.Fprintf(&b, "the sales of items: %d restocks, %d removals of unsold units (%d refused: none unsold), %d pauses; %d changes given up on\n",
		r.Stock.Restocked, r.Stock.Removed, r.Stock.RemovalsRefused, r.Stock.Paused, r.Stock.Failed)
	rc := r.Room
	fmt.Fprintf(&b, "the sales behind a waiting room: %d rounds, %d joins; %d waits on the stream, %d polling (%d polls); "+
		"%d admitted, %d sold out, %d closed, %d admissions expired, %d given up; %d orders accepted with an admission; "+
		"%d orders without one, %d refused 403 NOT_ADMITTED, %d 409 SOLD_OUT, none accepted unless failed below\n",
		rc.Rounds, rc.Joins, rc.Streamed, rc.Polled, rc.Polls, rc.Admitted, rc.SoldOut, rc.Closed, rc.Expired, rc.GaveUp, rc.Accepted,
		rc.Probes, rc.NotAdmitted, rc.ProbesSoldOut)
	var m invariants.Money
	for _, inv := range r.Invariants {
		if inv.Scope == "settled" {
			m.Payments, m.Confirmed, m.Refunds = m.Payments+inv.Money.Payments, m.Confirmed+inv.Money.Confirmed, m.Refunds+inv.Money.Refunds
			m.PaidCents, m.RefundedCents = m.PaidCents+inv.Money.PaidCents, m.RefundedCents+inv.Money.RefundedCents
		}
	}
	fmt.Fprintf(&b, "money: %d payments recorded, %d confirmed (%d cents), %d refunds (%d cents); the money invariants checked on every sale\n",
		m.Payments, m.Confirmed, m.PaidCents, m.Refunds, m.RefundedCents)
	keys := make([]string, 0, len(r.Answers))
	for k := range r.Answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("answers:")
	for i, k := range keys {
		if i%4 == 0 {
			b.WriteString("\n ")
		}
		fmt.Fprintf(&b, " %s ×%d;", k, r.Answers[k])
	}
	fmt.Fprintf(&b, "\nanswered past %v: %d\n", AnswerWithin, r.Late)
	fmt.Fprintf(&b, "\nchecks: %d run (%d mid-run sale snapshots, %d skipped while Redis was paused), %d failed\n",
		r.Checks, r.LiveRounds, r.LiveSkipped, len(r.Failures))
	for _, l := range r.Linear {
		fmt.Fprintf(&b, "  linearizable? %s\n", l)
	}
	for _, inv := range r.Invariants {
		if !inv.OK() {
			b.WriteString(inv.String())
			b.WriteString("\n")
		}
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL %s\n", f)
	}
	if r.Logs != "" {
		fmt.Fprintf(&b, "process logs kept in %s\n", r.Logs)
	}
	verdict := "PASS: every invariant held"
	if !r.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\nverdict: %s (replay: -seed %d)\n", verdict, r.Seed)
	return b.String()
}
