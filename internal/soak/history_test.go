package soak

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The sale's model, on small histories whose verdict is known: what a
// sale must never answer is Illegal, what it may is Ok.
func TestSaleModel_verdicts(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	type step struct {
		user, qty int64
		status    int
		code, no  string
		at, took  int // ms
	}
	place := func(h *history, s step) {
		h.place(1, s.user, saleIn{Kind: "place", User: s.user, Qty: s.qty, Key: s.no}, saleOut{Status: s.status, Code: s.code, No: s.no},
			ms(s.at), ms(s.at+s.took))
	}
	cases := []struct {
		name         string
		total, limit int64
		steps        []step
		releases     map[string]int // order -> ms
		changes      []step         // code "paid" or "cancelled" of order no, answered 200
		want         porcupine.CheckResult
	}{
		{name: "paid, never released", total: 1, limit: 1, steps: []step{{1, 1, 202, "", "a", 0, 5}},
			changes: []step{{code: "paid", no: "a", at: 100, took: 5}}, want: porcupine.Ok},
		{name: "a paid order released (its units sold again)", total: 1, limit: 1, steps: []step{{1, 1, 202, "", "a", 0, 5}},
			changes: []step{{code: "paid", no: "a", at: 100, took: 5}}, releases: map[string]int{"a": 2000}, want: porcupine.Illegal},
		{name: "a cancel answered with its release inside it", total: 1, limit: 1, steps: []step{{1, 1, 202, "", "a", 0, 5}},
			changes: []step{{code: "cancelled", no: "a", at: 100, took: 50}}, releases: map[string]int{"a": 120}, want: porcupine.Ok},
		{name: "a cancel answered and never made", total: 1, limit: 1, steps: []step{{1, 1, 202, "", "a", 0, 5}},
			changes: []step{{code: "cancelled", no: "a", at: 100, took: 50}}, want: porcupine.Illegal},
		{name: "sold out after the last unit", total: 2, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {2, 1, 202, "", "b", 10, 5}, {3, 1, 409, "SOLD_OUT", "", 3000, 5},
		}, want: porcupine.Ok},
		{name: "a 202 past the stock (oversold)", total: 2, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {2, 1, 202, "", "b", 10, 5}, {3, 1, 202, "", "c", 20, 5},
		}, want: porcupine.Illegal},
		{name: "sold out while a unit was left", total: 2, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {3, 1, 409, "SOLD_OUT", "", 5000, 5},
		}, want: porcupine.Illegal},
		{name: "concurrent places: either order", total: 1, limit: 1, steps: []step{
			{1, 1, 409, "SOLD_OUT", "", 0, 50}, {2, 1, 202, "", "b", 0, 50},
		}, want: porcupine.Ok},
		{name: "over the limit while under it", total: 10, limit: 2, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {1, 1, 409, "LIMIT_EXCEEDED", "", 2000, 5},
		}, want: porcupine.Illegal},
		{name: "a double tap: one order twice", total: 1, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {1, 1, 202, "", "a", 1, 5},
		}, want: porcupine.Ok},
		{name: "a released unit sells again", total: 1, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {2, 1, 202, "", "b", 3000, 5},
		}, releases: map[string]int{"a": 2000}, want: porcupine.Ok},
		{name: "sold out just after a release: the flag's allowance", total: 1, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {2, 1, 409, "SOLD_OUT", "", 2500, 5},
		}, releases: map[string]int{"a": 2000}, want: porcupine.Ok},
		{name: "sold out long after a release", total: 1, limit: 1, steps: []step{
			{1, 1, 202, "", "a", 0, 5}, {2, 1, 409, "SOLD_OUT", "", 5000, 5},
		}, releases: map[string]int{"a": 2000}, want: porcupine.Illegal},
		{name: "no answer: it may have run", total: 1, limit: 1, steps: []step{
			{1, 1, 0, "", "", 0, -1}, {2, 1, 202, "", "b", 100, 5},
		}, want: porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHistory()
			h.sale(1, c.total, c.limit)
			for _, s := range c.steps {
				if s.took < 0 {
					h.place(1, s.user, saleIn{Kind: "place", User: s.user, Qty: s.qty}, saleOut{}, ms(s.at), -1)
					continue
				}
				place(h, s)
			}
			for no, at := range c.releases {
				h.release(1, 1, 1, no, ms(at))
			}
			for _, ch := range c.changes {
				h.changed(1, 9, ch.code, ch.no, ms(ch.at), ms(ch.at+ch.took))
			}
			got := h.check(context.Background(), ms(10_000), 10*time.Second, "")
			if len(got) != 1 || got[0].Result != c.want {
				t.Fatalf("got %v, want %s", got, c.want)
			}
		})
	}
}
