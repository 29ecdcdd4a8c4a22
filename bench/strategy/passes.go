package main

// The passes every row is driven by: a timed throughput run, the sell-out
// run that counts oversold units, and the sold-out path against a hello
// endpoint; each one wrk run against a sale of its own.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// pass puts a sale of stock units on for r's strategy and drives it for d;
// into (if not nil) gets the run's figures.
func (b *bench) pass(ctx context.Context, r *row, stock int, d time.Duration, into *row) (int64, error) {
	return b.passThen(ctx, r, stock, d, into, nil)
}

// passThen is pass with settle (if not nil) run on the sale after the load
// and before the closing reading of the CPU meters: the whole system's
// wait for MySQL to hold every order (wholeSystem).
func (b *bench) passThen(ctx context.Context, r *row, stock int, d time.Duration, into *row, settle func(id int64) error) (int64, error) {
	// A limit nobody reaches in a run (50,000 users × 100): these runs
	// measure accepting, not refusing. A fresh shopper buys once.
	id, who, remove, err := b.saleFor(ctx, r, stock, d, 100)
	if err != nil {
		return 0, err
	}
	defer remove()
	path := ""
	if r.ours {
		b.ours = append(b.ours, id)
	} else {
		path = fmt.Sprintf(r.path, id)
	}
	b.current.Store(id)
	if r.key == "(a)" {
		b.rdb.Set(ctx, bareKey(strconv.FormatInt(id, 10)), stock, 0)
	}
	before, err := b.meter(ctx, r)
	if err != nil {
		return 0, err
	}
	profiled := b.profileRun(ctx, r, d)
	res, err := b.wrk(ctx, r.base, id, path, d, who, r.items)
	if err != nil {
		return 0, err
	}
	if err := profiled(); err != nil {
		return 0, err
	}
	if settle != nil {
		if err := settle(id); err != nil {
			return 0, err
		}
	}
	after, err := b.meter(ctx, r)
	if err != nil {
		return 0, err
	}
	if into != nil {
		if res.Reused > 0 {
			return 0, fmt.Errorf("%s: %d requests sent a user a second time: more than -fresh-rate %d orders a second; raise it",
				r.key, res.Reused, b.o.freshRate)
		}
		accepted := res.Codes["202"]
		rps := float64(accepted) / res.Seconds
		into.runs = append(into.runs, rps)
		n := float64(len(into.runs))
		into.rps = (into.rps*(n-1) + rps) / n
		into.p50 = time.Duration((float64(into.p50)*(n-1) + float64(res.P50)) / n)
		into.p99 = time.Duration((float64(into.p99)*(n-1) + float64(res.P99)) / n)
		if accepted > 0 {
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(accepted) }
			into.cmdsPerOrder = (into.cmdsPerOrder*(n-1) + float64(after.commands-before.commands)/float64(accepted)) / n
			into.redisUS = (into.redisUS*(n-1) + per(after.redis-before.redis)) / n
			into.serverUS = (into.serverUS*(n-1) + per(after.server-before.server)) / n
			into.addCPU(before, after, res.CPU, accepted, len(into.runs))
		}
		into.lo, into.hi = rps, rps
		for _, v := range into.runs {
			into.lo, into.hi = min(into.lo, v), max(into.hi, v)
		}
		into.errors += res.Errors
		into.codes = res.Codes
		if accepted != res.Requests {
			say("%s: not every answer was 202: %v", r.key, res.Codes)
		}
	}
	return id, nil
}

// throughput is one timed run of r, on stock that cannot run out.
func (b *bench) throughput(ctx context.Context, r *row) error {
	_, err := b.pass(ctx, r, 10_000_000, b.o.duration, r)
	return err
}

// sellOut runs r on 300 units for 5 s: how many more than 300 were sold,
// by the answers and by the stock left. Fresh shoppers are minted for 5 s
// at -fresh-rate; once the units are gone the refusals may outrun them and
// send users again, which decides nothing here (a user who bought none
// is refused sold out either way).
func (b *bench) sellOut(ctx context.Context, r *row) error {
	const units = 300
	const d = 5 * time.Second
	say("%s: sell-out, %d units", r.key, units)
	id, who, remove, err := b.saleFor(ctx, r, units, d, 5)
	if err != nil {
		return err
	}
	defer remove()
	path, key := "", rediskeys.For(id).Stock
	if r.ours {
		b.ours = append(b.ours, id)
	} else {
		path = fmt.Sprintf(r.path, id)
	}
	if r.key == "(a)" {
		key = bareKey(strconv.FormatInt(id, 10))
		b.rdb.Set(ctx, key, units, 0)
	}
	res, err := b.wrk(ctx, r.base, id, path, d, who, r.items)
	if err != nil {
		return err
	}
	left, err := b.rdb.Get(ctx, key).Int64()
	if err != nil {
		return err
	}
	r.oversold = max(0, res.Codes["202"]-units, -left)
	if res.Codes["202"] != units {
		say("%s: %d of %d units sold in the sell-out run (answers %v)", r.key, res.Codes["202"], units, res.Codes)
	}
	return nil
}

// saleFor creates r's sale of stock units and the users who order in it
// for d: the rotating users with limit, or, for a fresh row, users never
// seen before, limit 1, their tokens minted now (before the pass, so
// minting is not measured) — for a room row with their admissions to the
// sale, whose waiting room admits as many a second as it may (every order
// of the run is an admitted shopper's). remove deletes the fresh files.
func (b *bench) saleFor(ctx context.Context, r *row, stock int, d time.Duration, limit int) (int64, users, func(), error) {
	s := loadtest.Sale{Stock: stock, Limit: limit, Items: r.items}
	if r.fresh {
		s.Limit = 1
	}
	if r.room {
		s.AdmitPerSecond = 100_000
	}
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, s)
	if err != nil {
		return 0, users{}, nil, err
	}
	if !r.fresh {
		return id, users{file: b.tokens}, func() {}, nil
	}
	var room int64
	if r.room {
		room = id
	}
	u, remove, err := b.freshUsers(d, room)
	if err != nil {
		return 0, users{}, nil, err
	}
	return id, u, remove, nil
}

// wrk drives base's orders of sale id (path: another endpoint) for d, as
// who; items above 1 has each order name the next of the sale's items.
func (b *bench) wrk(ctx context.Context, base string, id int64, path string, d time.Duration, who users, items int) (loadtest.Result, error) {
	return loadtest.RunWrk(ctx, loadtest.WrkRun{URL: base, Activity: id, TokensFile: who.file, Once: who.once,
		Threads: b.o.threads, Conns: b.o.conns, Duration: d, Dir: b.stack.Dir, Path: path, Items: items})
}

// soldOutVsHello measures, in rotation, the sold-out path (an order of a
// sold-out sale: 409 SOLD_OUT), a waiting room's poll (GET .../queue of a
// shopper waiting: 200, issue 42's "polls/s per api ≥ 80% of the sold-out
// path's answers/s") and a gin hello: the best run of each.
func (b *bench) soldOutVsHello(ctx context.Context) (soldOut, polls, hello loadtest.Result, err error) {
	id, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: 1, Limit: 1})
	if err != nil {
		return
	}
	b.ours = append(b.ours, id)
	// A waiting room letting in one shopper a second, every rotating user
	// joined: a poll is a waiting shopper's read.
	room, err := loadtest.CreateSale(ctx, b.api, b.stack.AdminToken, loadtest.Sale{Stock: 1_000_000, Limit: 1, AdmitPerSecond: 1})
	if err != nil {
		return
	}
	b.ours = append(b.ours, room)
	say("waiting room: %d shoppers join sale %d", b.o.users, room)
	if err = loadtest.JoinQueue(ctx, b.api, room, b.tokens, 32); err != nil {
		return
	}
	rotating := users{file: b.tokens}
	queuePath := fmt.Sprintf("/v1/activities/%d/queue", room)
	// In rotation, like the rows; the best run of each (the ceiling each
	// can reach here), so one unlucky run does not decide the ratio.
	for round := 1; round <= b.o.repeat; round++ {
		say("sold-out path: one unit, then %v of refusals (run %d)", b.o.duration, round)
		so, err := b.wrk(ctx, b.api, id, "", b.o.duration, rotating, 0)
		if err != nil {
			return soldOut, polls, hello, err
		}
		say("waiting room polls: %v (run %d)", b.o.duration, round)
		po, err := loadtest.RunWrk(ctx, loadtest.WrkRun{URL: b.api, Activity: room, TokensFile: b.tokens, Threads: b.o.threads,
			Conns: b.o.conns, Duration: b.o.duration, Dir: b.stack.Dir, Path: queuePath, Get: true})
		if err != nil {
			return soldOut, polls, hello, err
		}
		say("gin hello: %v (run %d)", b.o.duration, round)
		he, err := b.wrk(ctx, b.srv, 0, "/hello", b.o.duration, rotating, 0)
		if err != nil {
			return soldOut, polls, hello, err
		}
		if so.RPS() > soldOut.RPS() {
			soldOut = so
		}
		if po.RPS() > polls.RPS() {
			polls = po
		}
		if he.RPS() > hello.RPS() {
			hello = he
		}
	}
	return soldOut, polls, hello, nil
}

// profileRun, with -profile, profiles the first run of d of (f) (the
// fresh-shopper api: fresh-cpu.pprof) and of (f)+worker (its api and its
// worker: whole-api-cpu.pprof, whole-worker-cpu.pprof): CPU from 2 s in
// to 2 s before the run's end, wrk's ramp left out, and the allocations'
// profile after it (…-allocs.pprof). The returned wait ends with every
// profile written into -profile's directory. Otherwise it does nothing.
func (b *bench) profileRun(ctx context.Context, r *row, d time.Duration) (wait func() error) {
	var procs map[string]string // file prefix → DEBUG_ADDR
	switch {
	case b.o.profile == "" || b.profiled || d < 6*time.Second:
	case r.key == "(f)" && b.freshDebug != "":
		procs = map[string]string{"fresh": b.freshDebug}
	case r.key == "(f)+worker" && b.wholeDebug != nil:
		procs = b.wholeDebug
	}
	if procs == nil {
		return func() error { return nil }
	}
	b.profiled = true
	get := func(addr, what, file string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+what, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("profile %s of %s: %s", what, addr, resp.Status)
		}
		out, err := os.Create(filepath.Join(b.o.profile, file))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, resp.Body); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	}
	done := make(chan error, len(procs))
	for name, addr := range procs {
		go func() {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
			secs := int((d - 4*time.Second).Seconds())
			done <- get(addr, fmt.Sprintf("profile?seconds=%d", secs), name+"-cpu.pprof")
		}()
	}
	return func() error {
		var first error
		for range procs {
			if err := <-done; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		for name, addr := range procs {
			if err := get(addr, "allocs", name+"-allocs.pprof"); err != nil {
				return err
			}
			say("%s: profiles in %s (go tool pprof -top %s)", r.key, b.o.profile, filepath.Join(b.o.profile, name+"-cpu.pprof"))
		}
		return nil
	}
}
