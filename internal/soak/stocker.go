package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

// StockChanges counts what the soak's admin did to the sales of items
// while they sold (stock): restocks, removals of unsold units (and those
// refused, none being unsold), and pauses.
type StockChanges struct {
	Restocked, Removed, RemovalsRefused, Paused int
	Failed                                      int // changes given up on (the api not answering through a fault)
}

// stock is the soak's admin, at work on the sales of items while they
// sell, through the admin API like any admin, faults and all: every 2-4 s
// it restocks one of a sale's items (60%), removes a few of its unsold
// units (20%: refused when none is unsold), or pauses the sale for one to
// two seconds and resumes it (20%). The invariants hold throughout:
// LiveItems mid-run (the total is Redis's, restocks in), Run and Settled at
// the end item by item, the ledger included (sold ≤ created + added −
// removed).
//
// The first three changes are one of each kind, in a random order: drawn
// at random from the start, a short soak went without a pause about once
// in a hundred runs (0.8 to the twentieth), and its test wants each kind.
func (r *run) stock(ctx context.Context, rng *rand.Rand) {
	firsts := rng.Perm(3)
	draw := func() float64 {
		if len(firsts) == 0 {
			return rng.Float64()
		}
		k := firsts[0]
		firsts = firsts[1:]
		return []float64{0.3, 0.7, 0.9}[k] // a restock, a removal, a pause
	}
	for sleep(ctx, 2*time.Second+time.Duration(rng.Int64N(int64(2*time.Second)))) {
		for _, sl := range r.sales.ofItems() {
			item := loadtest.ItemSKU(rng.IntN(sl.Items))
			path := fmt.Sprintf("/admin/v1/activities/%d", sl.ID)
			switch x := draw(); {
			case x < 0.6:
				add := 5 + rng.IntN(26)
				if code := r.admin(ctx, "POST", path+"/stock", map[string]any{"item": item, "add": add}); code == 200 {
					r.count(func(c *StockChanges) { c.Restocked++ })
				}
			case x < 0.8:
				switch r.admin(ctx, "POST", path+"/stock", map[string]any{"item": item, "add": -(1 + rng.IntN(5))}) {
				case 200:
					r.count(func(c *StockChanges) { c.Removed++ })
				case 409:
					r.count(func(c *StockChanges) { c.RemovalsRefused++ })
				}
			default:
				if r.admin(ctx, "POST", path+"/pause", nil) == 200 {
					r.count(func(c *StockChanges) { c.Paused++ })
				}
				sleep(ctx, time.Second+time.Duration(rng.Int64N(int64(time.Second))))
				r.admin(context.WithoutCancel(ctx), "POST", path+"/resume", nil) // a pause never outlives the load
			}
		}
	}
}

// finishStock gives each sale of items a last restock of one unit once
// the load has stopped: its load carries MySQL's totals into Redis, so a
// removal whose record failed through a fault (Redis short of the record:
// undersold, the documented window) is given back, as the next change
// always gives it back in service; and resumes any sale a fault left
// paused.
func (r *run) finishStock(ctx context.Context) {
	for _, sl := range r.sales.every() {
		if sl.Items > 1 {
			path := fmt.Sprintf("/admin/v1/activities/%d", sl.ID)
			r.admin(ctx, "POST", path+"/resume", nil)
			r.admin(ctx, "POST", path+"/stock", map[string]any{"item": loadtest.ItemSKU(0), "add": 1})
		}
	}
}

func (r *run) count(f func(*StockChanges)) { r.tally(func(rep *Report) { f(&rep.Stock) }) }

// admin sends an admin request and returns its status: tried again, as a
// shopper's app tries, on no answer and on a 5xx, for about half a minute;
// 0 when given up on.
func (r *run) admin(ctx context.Context, method, path string, body any) int {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	for try := 0; try < 30 && ctx.Err() == nil; try++ {
		if try > 0 {
			sleep(ctx, time.Second)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*AnswerWithin)
		req, _ := http.NewRequestWithContext(rctx, method, r.stack.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+r.stack.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode < 500 {
			return resp.StatusCode
		}
	}
	r.count(func(c *StockChanges) { c.Failed++ })
	return 0
}
