package soak

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The history of the flash sales, checked by a linearizability checker
// that is not ours (github.com/anishathalye/porcupine) against a model of
// a sale: every place the shoppers made — each try's first send to its
// last answer, and what it was — and every order's release (a cancel, by
// the shopper or at its pay-by), at the instant Redis made it (the order's
// cancelled_at is Redis's TIME in the transition), and every pay or
// cancel a shopper was answered 200 paid or cancelled. A 202 that no
// sequential order of these explains is a bug; so is a 409 SOLD_OUT or
// LIMIT_EXCEEDED while the model had room, a paid order released, a
// cancel confirmed that never happened. Group buys are left to the
// invariants: a group's life (open, join, fill, fail) is not modelled.
//
// One allowance, the service's documented one: a sold-out answer may come
// from an api's local sold-out flag, which a restock notice clears and
// which lives at most stock's SoldOutTTL (1 s) when the notice is lost. So
// a SOLD_OUT is checked as if invoked soldOutStale earlier: it must be
// true at some instant from then to its answer.
const soldOutStale = time.Second + 200*time.Millisecond

// saleIn is one operation on a sale.
type saleIn struct {
	Kind string // "place", "release", or a shopper's "paid" or "cancelled" (a 200 saying so)
	User int64
	Qty  int64
	Key  string // place: its Idempotency-Key
	No   string // release: the order
}

// saleOut is its outcome.
type saleOut struct {
	Status int    // place: the HTTP status; 0 no answer (it may or may not have run)
	Code   string // an error's code
	No     string // a 202's order
}

// history records the flash sales' operations as they happen.
type history struct {
	mu    sync.Mutex
	ops   map[int64][]porcupine.Operation // by sale
	limit map[int64]int64                 // each sale's per-user limit
	total map[int64]int64                 // and its units
}

func newHistory() *history {
	return &history{ops: map[int64][]porcupine.Operation{}, limit: map[int64]int64{}, total: map[int64]int64{}}
}

// sale declares a sale before its first operation.
func (h *history) sale(id, total, limit int64) {
	h.mu.Lock()
	h.total[id], h.limit[id] = total, limit
	h.mu.Unlock()
}

// place records one place: sent and got are times since the run's start
// (got < 0: never answered; it then stays open to the history's end).
func (h *history) place(sale, client int64, in saleIn, out saleOut, sent, got time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	call := sent
	if out.Status == 409 && out.Code == "SOLD_OUT" {
		call -= soldOutStale
	}
	h.ops[sale] = append(h.ops[sale], porcupine.Operation{ClientId: int(client), Input: in, Output: out, Call: int64(call), Return: int64(got)})
}

// changed records a shopper's pay or cancel that was answered 200 with
// the order paid (kind "paid") or cancelled ("cancelled").
func (h *history) changed(sale, client int64, kind, no string, sent, got time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[sale] = append(h.ops[sale], porcupine.Operation{ClientId: int(client), Input: saleIn{Kind: kind, No: no},
		Output: saleOut{Status: 200}, Call: int64(sent), Return: int64(got)})
}

// release records an order's release at Redis's instant at.
func (h *history) release(sale, user, qty int64, no string, at time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[sale] = append(h.ops[sale], porcupine.Operation{ClientId: -1, Input: saleIn{Kind: "release", User: user, Qty: qty, No: no},
		Call: int64(at - time.Millisecond), Return: int64(at + time.Millisecond)})
}

// saleState is the model's state: units left, each user's units held, and
// each order's state — standing (placed, its units held), paid (standing,
// never to be released) or released — so a replay of a key is no second
// order, a release is of an order that stands unpaid, a pay answered paid
// is of one that stands, a cancel answered cancelled of one released.
type saleState struct {
	left   int64
	held   map[int64]int64
	orders map[string]orderState
}

type orderState uint8

const (
	standing orderState = iota + 1
	paid
	released
)

func (s saleState) with(left int64, user, dheld int64, no string, st orderState) saleState {
	n := saleState{left: left, held: maps.Clone(s.held), orders: maps.Clone(s.orders)}
	if v := n.held[user] + dheld; v != 0 {
		n.held[user] = v
	} else {
		delete(n.held, user)
	}
	n.orders[no] = st
	return n
}

// saleModel is a flash sale of total units, limit a user.
func saleModel(total, limit int64) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any {
			return []any{saleState{left: total, held: map[int64]int64{}, orders: map[string]orderState{}}}
		},
		Step: func(state, input, output any) []any {
			s, in := state.(saleState), input.(saleIn)
			switch in.Kind {
			case "release":
				if s.orders[in.No] != standing {
					return nil
				}
				return []any{s.with(s.left+in.Qty, in.User, -in.Qty, in.No, released)}
			case "paid":
				switch s.orders[in.No] {
				case standing:
					return []any{s.with(s.left, 0, 0, in.No, paid)}
				case paid:
					return []any{s}
				}
				return nil
			case "cancelled":
				if s.orders[in.No] != released {
					return nil
				}
				return []any{s}
			}
			out := output.(saleOut)
			room := s.left >= in.Qty && s.held[in.User]+in.Qty <= limit
			switch {
			case out.Status == 202:
				if _, ok := s.orders[out.No]; ok { // the key's replay (a double tap, a retry): its order
					return []any{s}
				}
				if !room {
					return nil
				}
				return []any{s.with(s.left-in.Qty, in.User, in.Qty, out.No, standing)}
			case out.Status == 409 && out.Code == "SOLD_OUT":
				if s.left >= in.Qty {
					return nil
				}
				return []any{s}
			case out.Status == 409 && out.Code == "LIMIT_EXCEEDED":
				if s.held[in.User]+in.Qty <= limit {
					return nil
				}
				return []any{s}
			case out.Status == 0: // no answer: it ran or it did not; an order it made is not known by number
				return []any{s}
			default: // another refusal (the sale ended, …): nothing changed
				return []any{s}
			}
		},
		Equal: func(a, b any) bool {
			x, y := a.(saleState), b.(saleState)
			return x.left == y.left && maps.Equal(x.held, y.held) && maps.Equal(x.orders, y.orders)
		},
		Hash: func(state any) uint64 {
			s := state.(saleState)
			h := uint64(s.left)*1_000_003 + uint64(len(s.orders))
			for u, n := range s.held {
				h += uint64(u)*31 + uint64(n)
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in := input.(saleIn)
			switch in.Kind {
			case "release":
				return fmt.Sprintf("release %s (user %d, %d units)", in.No, in.User, in.Qty)
			case "paid", "cancelled":
				return fmt.Sprintf("%s %s -> 200", in.Kind, in.No)
			}
			out := output.(saleOut)
			return fmt.Sprintf("place user %d ×%d key %s -> %d %s%s", in.User, in.Qty, in.Key, out.Status, out.Code, out.No)
		},
		DescribeState: func(state any) string {
			s := state.(saleState)
			return fmt.Sprintf("%d left, %d orders", s.left, len(s.orders))
		},
	}
}

// LinearResult is one sale's check.
type LinearResult struct {
	Sale   int64
	Ops    int
	Result porcupine.CheckResult
	Took   time.Duration
	File   string // an illegal history's visualization
}

func (l LinearResult) String() string {
	s := fmt.Sprintf("sale %d: %d operations, %s in %v", l.Sale, l.Ops, l.Result, l.Took.Round(time.Millisecond))
	if l.File != "" {
		s += ", drawn in " + l.File
	}
	return s
}

// check checks every sale's history; end closes what never returned. A
// sale's check gives up after timeout (Unknown: not shown either way).
func (h *history) check(ctx context.Context, end time.Duration, timeout time.Duration, dir string) []LinearResult {
	h.mu.Lock()
	sales := slices.Sorted(maps.Keys(h.ops))
	h.mu.Unlock()
	var out []LinearResult
	for _, id := range sales {
		if ctx.Err() != nil {
			break
		}
		h.mu.Lock()
		ops := slices.Clone(h.ops[id])
		total, limit := h.total[id], h.limit[id]
		h.mu.Unlock()
		for i := range ops {
			if ops[i].Return < 0 {
				ops[i].Return = int64(end)
			}
		}
		sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		nm := saleModel(total, limit)
		model := nm.ToModel()
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		lr := LinearResult{Sale: id, Ops: len(ops), Result: res, Took: time.Since(start)}
		if res == porcupine.Illegal && dir != "" {
			lr.File = filepath.Join(dir, fmt.Sprintf("sale-%d-history.html", id))
			if err := os.MkdirAll(dir, 0o755); err == nil {
				if err := porcupine.VisualizePath(model, info, lr.File); err != nil {
					lr.File = "(not drawn: " + strings.TrimSpace(err.Error()) + ")"
				}
			}
		}
		out = append(out, lr)
	}
	return out
}
