package soak

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/paysim"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/tasks"
)

// liveRound runs the mid-run checks on every sale so far. A sale Redis
// cannot answer for (paused) is skipped this round, not failed: the check
// is of what Redis holds, and a paused Redis holds still.
func (r *run) liveRound(ctx context.Context) {
	for _, s := range r.sales.every() {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		var rep invariants.Report
		var err error
		if s.Items > 1 { // restocked while it sells: Redis's total, and its items
			rep, err = invariants.LiveItems(cctx, r.rdb, s.ID, s.Limit)
		} else {
			rep, err = invariants.Live(cctx, r.rdb, s.ID, s.Total, s.Limit)
		}
		cancel()
		r.repMu.Lock()
		if err != nil {
			r.rep.LiveSkipped++
		} else {
			r.rep.LiveRounds++
			r.rep.Checks += len(rep.Checks)
		}
		r.repMu.Unlock()
		for _, c := range rep.Checks {
			if !c.OK {
				r.fail("mid-run, sale %d: %s: %s", s.ID, c.Name, c.Detail)
			}
		}
	}
}

// quiet is what the wait for quiet last saw.
type quiet struct {
	tasks                  int // asynq tasks pending, active, scheduled or retrying
	archived               int // tasks asynq gave up on
	outbox, unsettled, lag int64
	reason                 string // why not quiet, "" if quiet
}

// settle waits until the system is quiet: every payment deadline and group
// deadline of the load has passed, no task is queued, running, scheduled or
// retrying, every sale's outbox is empty, no group is unsettled, and MySQL
// holds as many orders as Redis accepted — twice in a row a second apart.
// Not quiet within SettleTimeout is a failure (something is stuck), and the
// checks run anyway.
func (r *run) settle(ctx context.Context, loadEnded time.Time) {
	var longest time.Duration
	for _, s := range r.sales.every() {
		longest = max(longest, s.GroupTTL)
	}
	// A request in flight when the load stopped may still be accepted a
	// moment later: a few seconds' margin after the last deadline.
	earliest := loadEnded.Add(max(payTTL, longest) + 5*time.Second)
	r.say("settling: every deadline passes at t+%.1fs; then waiting for the worker to catch up (at most %v)",
		earliest.Sub(r.start).Seconds(), r.opt.SettleTimeout)
	sleep(ctx, time.Until(earliest))
	deadline := loadEnded.Add(r.opt.SettleTimeout)
	insp := asynq.NewInspectorFromRedisClient(r.rdb)
	calm, last, said := 0, quiet{}, time.Now()
	for calm < 2 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.fail("not settled %v after the load: %s", r.opt.SettleTimeout, last.reason)
			return
		}
		last = r.look(ctx, insp)
		if last.reason == "" {
			calm++
		} else {
			calm = 0
		}
		// What it waits for, now and then, so a slow settle explains
		// itself in the log.
		if last.reason != "" && time.Since(said) >= 10*time.Second {
			r.say("not settled yet: %s", last.reason)
			said = time.Now()
		}
		sleep(ctx, time.Second)
	}
	r.say("settled %.1fs after the load", time.Since(loadEnded).Seconds())
	if last.archived > 0 {
		r.fail("asynq gave up on %d tasks (archived): an order change or a settlement was dropped", last.archived)
	}
}

// look takes one look at whether the system is quiet.
func (r *run) look(ctx context.Context, insp *asynq.Inspector) quiet {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var q quiet
	info, err := insp.GetQueueInfo(tasks.QueueName)
	switch {
	case errors.Is(err, asynq.ErrQueueNotFound):
	case err != nil:
		q.reason = "asynq: " + err.Error()
		return q
	default:
		q.tasks = info.Pending + info.Active + info.Scheduled + info.Retry + info.Aggregating
		q.archived = info.Archived
	}
	for _, s := range r.sales.every() {
		k := rediskeys.For(s.ID)
		live, err := stock.New(r.rdb, stock.Config{}).Read(ctx, s.ID) // every shard's outbox and acceptances
		n, accepted := live.Unrecorded, live.Accepted
		u, err2 := r.rdb.ZCard(ctx, k.Unsettled()).Result()
		var recorded int64
		err4 := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE activity_id = ?", s.ID).Scan(&recorded)
		if err := errors.Join(err, err2, err4); err != nil {
			q.reason = fmt.Sprintf("sale %d: %v", s.ID, err)
			return q
		}
		q.outbox += n
		q.unsettled += u
		q.lag += accepted - recorded
	}
	var why []string
	if q.tasks > 0 {
		why = append(why, fmt.Sprintf("%d tasks queued, running, scheduled or retrying (pending %d, active %d, scheduled %d, retry %d)",
			q.tasks, info.Pending, info.Active, info.Scheduled, info.Retry))
	}
	if q.outbox > 0 {
		why = append(why, fmt.Sprintf("%d outbox entries", q.outbox))
	}
	if q.unsettled > 0 {
		why = append(why, fmt.Sprintf("%d groups unsettled", q.unsettled))
	}
	if q.lag != 0 {
		why = append(why, fmt.Sprintf("MySQL %d orders short of Redis", q.lag))
	}
	q.reason = strings.Join(why, "; ")
	return q
}

// finalChecks runs every invariant on every sale, once settled, and
// compares the shoppers' ledger with the service.
func (r *run) finalChecks(ctx context.Context) error {
	// What only the provider knows: how often it refunded each payment,
	// counted over every process's refunds (the log read once).
	refunds, err := paysim.RefundLog(r.stack.RefundLog()).Read()
	if err != nil {
		return err
	}
	for _, s := range r.sales.every() {
		run, err := invariants.Run(ctx, r.rdb, r.db, s.ID, invariants.Options{Accepted: r.led.acceptedIn(s.ID), ExpectPersisted: true})
		if err != nil {
			return err
		}
		settled, err := invariants.Settled(ctx, r.rdb, r.db, s.ID)
		if err != nil {
			return err
		}
		if err := settled.CheckProviderRefunds(ctx, r.db, s.ID, refunds); err != nil {
			return err
		}
		for _, rep := range []invariants.Report{run, settled} {
			r.rep.Invariants = append(r.rep.Invariants, rep)
			r.rep.Checks += len(rep.Checks)
			for _, c := range rep.Checks {
				if !c.OK {
					r.fail("at the end, sale %d: %s: %s", s.ID, c.Name, c.Detail)
				}
			}
		}
		r.rep.GroupsSucceeded += settled.Groups["succeeded"]
		r.rep.GroupsFailed += settled.Groups["failed"]
		r.rep.Sales = append(r.rep.Sales, s.String())
	}
	out, err := r.led.settle(ctx, r.rdb)
	if err != nil {
		return err
	}
	r.rep.Checks++
	r.rep.Accepted, r.rep.Paid, r.rep.Cancelled, r.rep.Expired, r.rep.Refunded = out.accepted, out.paid, out.cancelled, out.expired, out.refunded
	for _, b := range out.broken {
		r.fail("a shopper was told otherwise: %s", b)
	}
	if err := r.checkAdmitted(ctx); err != nil {
		return err
	}
	r.rep.Answers = r.led.answerCounts()
	if err := r.checkWebhooks(ctx); err != nil {
		return err
	}
	return r.checkHistory(ctx)
}

// linearTimeout bounds porcupine's search of one sale's history: past it
// the answer is Unknown (reported, neither shown nor refuted).
const linearTimeout = time.Minute

// checkHistory completes the flash sales' history with what only the
// service knows — every order's release (cancelled_at, Redis's instant of
// it) and the orders no shopper was told of (a place whose every answer
// was lost: created_at, Redis's instant of the accept) — and has porcupine
// check each sale's.
func (r *run) checkHistory(ctx context.Context) error {
	told := map[string]bool{}
	r.hist.mu.Lock()
	for _, ops := range r.hist.ops {
		for _, op := range ops {
			if out, ok := op.Output.(saleOut); ok && out.Status == 202 {
				told[out.No] = true
			}
		}
	}
	r.hist.mu.Unlock()
	for _, s := range r.sales.every() {
		if !s.modelled() {
			continue
		}
		rows, err := r.db.QueryContext(ctx, `SELECT order_no, user_id, quantity, created_at, cancelled_at FROM orders WHERE activity_id = ?`, s.ID)
		if err != nil {
			return fmt.Errorf("soak: the history's orders: %w", err)
		}
		for rows.Next() {
			var no string
			var user, qty int64
			var created time.Time
			var cancelled sql.NullTime
			if err := rows.Scan(&no, &user, &qty, &created, &cancelled); err != nil {
				rows.Close()
				return err
			}
			if !told[no] {
				r.hist.place(s.ID, -1, saleIn{Kind: "place", User: user, Qty: qty, Key: "(none told)"},
					saleOut{Status: 202, No: no}, created.Sub(r.start)-time.Millisecond, created.Sub(r.start)+time.Millisecond)
			}
			if cancelled.Valid {
				r.hist.release(s.ID, user, qty, no, cancelled.Time.Sub(r.start))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	r.rep.Linear = r.hist.check(ctx, r.since(), linearTimeout, filepath.Join(os.TempDir(), fmt.Sprintf("flashsale-soak-history-%d", r.opt.Seed)))
	for _, l := range r.rep.Linear {
		r.rep.Checks++
		if l.Result == porcupine.Illegal {
			r.fail("porcupine: %s: no sequential order of the sale's operations explains their answers", l)
		}
	}
	return nil
}
