package invariants

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// The shop's webhooks, end to end (docs/webhooks.md): what the outbox
// holds against what a receiver subscribed to every type received. They
// compare the two whatever produced the events (activity.*, payment.*,
// order.* once the worker appends them), so a new producer is covered
// without a change here.

// OutboxEvent is a row of the outbox (webhook_events) as the checks need it.
type OutboxEvent struct {
	ID, Type, Subject string
	Sequence          int64
	BodySHA           string // hex of the first 8 bytes of SHA-256(body), as the receiver logs it
}

// Received is one delivery a receiver accepted (a line of
// internal/webhook/receiver's log).
type Received struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Subject  string `json:"subject"`
	Sequence int64  `json:"sequence"`
	BodySHA  string `json:"body_sha"`
}

// BodySHA is how the receiver names a body: hex of SHA-256's first 8 bytes.
func BodySHA(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:8])
}

// ReadOutbox reads every event of the outbox, in the order appended: the
// rows of webhook_events, and the orders' order.accepted, which is their
// row (migrations/00018), rendered as its producer renders it
// (webhook.OrderEvents) in currency, the orders' (PAYMENT_CURRENCY).
func ReadOutbox(ctx context.Context, db *sql.DB, currency string) ([]OutboxEvent, error) {
	type seqEvent struct {
		seq uint64
		e   OutboxEvent
	}
	var all []seqEvent
	rows, err := db.QueryContext(ctx, "SELECT seq, id, type, subject, sequence, body FROM webhook_events ORDER BY seq")
	if err != nil {
		return nil, fmt.Errorf("invariants: the outbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var se seqEvent
		var body []byte
		if err := rows.Scan(&se.seq, &se.e.ID, &se.e.Type, &se.e.Subject, &se.e.Sequence, &body); err != nil {
			return nil, err
		}
		se.e.BodySHA = BodySHA(body)
		all = append(all, se)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	orows, err := db.QueryContext(ctx, "SELECT o.event_seq, o.order_no, o.activity_id, o.user_id, o.quantity, o.amount_cents, "+
		"COALESCE(o.group_id, ''), COALESCE(o.item_sku, a.sku, ''), o.created_at FROM orders o "+
		"LEFT JOIN activities a ON a.id = o.activity_id WHERE o.event_seq IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("invariants: the orders' order.accepted: %w", err)
	}
	defer orows.Close()
	for orows.Next() {
		var se seqEvent
		var o order.Order
		var sku string
		if err := orows.Scan(&se.seq, &o.No, &o.ActivityID, &o.UserID, &o.Quantity, &o.AmountCents, &o.GroupID, &sku, &o.CreatedAt); err != nil {
			return nil, err
		}
		o.Status = order.PendingPayment
		e := webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: sku, Currency: currency})[0]
		se.e = OutboxEvent{ID: e.ID, Type: string(e.Type), Subject: e.Subject, Sequence: e.Sequence, BodySHA: BodySHA(e.Body)}
		all = append(all, se)
	}
	if err := orows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b seqEvent) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]OutboxEvent, len(all))
	for i, se := range all {
		out[i] = se.e
	}
	return out, nil
}

// Missing is the outbox's events the receiver has not received: what a
// drain waits for.
func Missing(outbox []OutboxEvent, received []Received) []OutboxEvent {
	got := make(map[string]bool, len(received))
	for _, r := range received {
		got[r.ID] = true
	}
	var out []OutboxEvent
	for _, e := range outbox {
		if !got[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// Webhooks checks a receiver subscribed to every type against the outbox,
// once its deliveries have drained: every event delivered; none received
// that the outbox does not hold (none invented), with the outbox's body;
// each subject's sequence complete (an order's 1, 2, 3 without a gap;
// every subject's numbers those of its events in the outbox); and every
// duplicate a repeat of one webhook-id (one event is never sent under two
// ids).
func Webhooks(outbox []OutboxEvent, received []Received) Report {
	rep := Report{Scope: "webhooks"}
	add := func(name string, bad []string, detail string) {
		c := Check{Name: name, OK: len(bad) == 0, Detail: detail}
		if len(bad) > 0 {
			sort.Strings(bad)
			c.Detail = fmt.Sprintf("%d: %s", len(bad), strings.Join(bad[:min(len(bad), 5)], "; "))
		}
		rep.Checks = append(rep.Checks, c)
	}
	byID := make(map[string]OutboxEvent, len(outbox))
	for _, e := range outbox {
		byID[e.ID] = e
	}
	missing := Missing(outbox, received)
	var bad []string
	for _, e := range missing {
		bad = append(bad, fmt.Sprintf("%s (%s of %s) never received", e.ID, e.Type, e.Subject))
	}
	add("every outbox event delivered", bad, fmt.Sprintf("%d events, %d deliveries received", len(outbox), len(received)))

	bad = nil
	times := map[string]int{}
	for _, r := range received {
		times[r.ID]++
		e, ok := byID[r.ID]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s (%s of %s) received, never appended", r.ID, r.Type, r.Subject))
		case e.BodySHA != r.BodySHA || e.Type != r.Type || e.Subject != r.Subject || e.Sequence != r.Sequence:
			bad = append(bad, fmt.Sprintf("%s received as %s of %s #%d body %s; the outbox holds %s of %s #%d body %s",
				r.ID, r.Type, r.Subject, r.Sequence, r.BodySHA, e.Type, e.Subject, e.Sequence, e.BodySHA))
		}
	}
	add("none received that was not appended (none invented)", bad, "every delivery an outbox event, its body the outbox's")

	bad = nil
	seqs := map[string][]int64{}    // received, by subject
	outSeqs := map[string][]int64{} // appended, by subject
	orders := map[string]bool{}
	idOf := map[string]string{} // (type, subject, sequence) → the id it came under
	for _, e := range outbox {
		outSeqs[e.Subject] = append(outSeqs[e.Subject], e.Sequence)
	}
	for _, r := range received {
		key := r.Type + " " + r.Subject + " #" + fmt.Sprint(r.Sequence)
		if id, ok := idOf[key]; ok && id != r.ID {
			bad = append(bad, fmt.Sprintf("%s came under two ids, %s and %s", key, id, r.ID))
		}
		idOf[key] = r.ID
		orders[r.Subject] = strings.HasPrefix(r.Type, "order.")
		if !slices.Contains(seqs[r.Subject], r.Sequence) {
			seqs[r.Subject] = append(seqs[r.Subject], r.Sequence)
		}
	}
	add("duplicates only as repeats of one webhook-id", bad, fmt.Sprintf("%d ids received more than once", countOver(times, 1)))

	bad = nil
	for subject, got := range seqs {
		slices.Sort(got)
		want := slices.Clone(outSeqs[subject])
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			bad = append(bad, fmt.Sprintf("%s: received %v, appended %v", subject, got, want))
			continue
		}
		if orders[subject] { // an order's numbers are 1..n (docs/webhooks.md, The events)
			for i, s := range got {
				if s != int64(i+1) {
					bad = append(bad, fmt.Sprintf("order %s: sequences %v have a gap", subject, got))
					break
				}
			}
		}
	}
	add("each subject's sequence complete", bad, fmt.Sprintf("%d subjects", len(seqs)))
	return rep
}

func countOver(m map[string]int, n int) int {
	c := 0
	for _, v := range m {
		if v > n {
			c++
		}
	}
	return c
}
