package soak

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

// The sale behind a waiting room (docs/waiting-room.md, issue 42), shopped
// as its apps shop it: join the queue, wait for the admission — on the
// queue's stream (half the shoppers) or by polling (the other half) — and
// order with the token, through the same order path and ledger as every
// flash sale (placeFlash), so the invariants (never oversold, never over
// the limit, every accepted order persisted once, the money) and
// porcupine's history cover it too. Some apps skip the queue and order
// without a token: refused 403 NOT_ADMITTED, or a broken promise. At the
// end every order of the sale must be a user's the service admitted
// (checkAdmitted), which covers the tokenless orders whose answers a fault
// lost as well.

// roomRate is the soak's waiting room's admit_per_second: more than the
// crowd joins (a quarter of the flash rounds are on this sale: 2-7 joins a
// second in the short soak), so its shoppers are let in steadily and a
// short soak's rounds are not stuck in the queue. Most joiners are
// admitted by the join's own answer: the join's script advances the
// counter past their ticket unless it last moved within 50 ms (one
// shopper at 20 a second). Those who come closer together wait, a fifth
// to a third of them (measured 2026-11-29): the stream's let in within a
// tick (250 ms), the polling ones at their first poll (1 s, the server's
// least poll_after_seconds).
const roomRate = 20

// roomWait bounds a shopper's wait for an admission, as a person's
// patience does: the business-aware admission stops while the admitted may
// still buy what is left, which on a nearly sold-out sale lasts until their
// admissions lapse (admission_ttl_seconds, 300 s by default).
const roomWait = 30 * time.Second

// probeEvery is one round on the sale in that many that first orders
// without an admission, as an app skipping the queue would.
const probeEvery = 6

// RoomCounts is what the shoppers of the sales behind a waiting room did
// and were told.
type RoomCounts struct {
	Rounds int64 // shopping rounds on them
	Joins  int64 // joins answered with a place
	// Waits for an admission, on the stream and by polling, and the polls
	// (GET .../queue) answered in them.
	Streamed, Polled, Polls int64
	// How the waits ended: admitted (a token), sold out, closed, the
	// user's earlier admission expired (409 ADMISSION_EXPIRED), given up on
	// after roomWait.
	Admitted, SoldOut, Closed, Expired, GaveUp int64
	// Orders sent without a token, those refused 403 NOT_ADMITTED, and
	// those answered 409 SOLD_OUT (the sold-out gate answers before any
	// check of the shopper); a 202 is a failure.
	Probes, NotAdmitted, ProbesSoldOut int64
	Accepted                           int64 // distinct orders accepted on them (the ledger's)
}

// roomRound is a flash round on sale sl, behind a waiting room: the plan
// drawn as any flash round's, maybe an order without a token first, then
// the queue, and the plan carried out with the admission.
func (s *shopper) roomRound(ctx context.Context, sl *sale) {
	p := s.drawFlash(sl)
	probe := s.rng.IntN(probeEvery) == 0
	app := loadtest.Shopper{Base: s.r.stack.URL, Token: s.tokens[p.user], HTTP: s.hc}
	s.r.tally(func(rep *Report) { rep.Room.Rounds++ })
	if probe {
		s.skipQueue(ctx, app, p)
	}
	if p.admission = s.admission(ctx, app, p); p.admission != "" {
		s.placeFlash(ctx, p)
	}
}

// skipQueue orders p's units without an admission, once: a refusal is
// right (403 NOT_ADMITTED; 409 SOLD_OUT from the sold-out gate), no answer
// says nothing (a fault's: not tried again, the final check covers it), a
// 202 is an order accepted without an admission — a failure, and the order
// goes into the ledger like any accepted one, to be checked all the same.
func (s *shopper) skipQueue(ctx context.Context, app loadtest.Shopper, p flashPlan) {
	what := "order without admission"
	tctx, cancel := context.WithTimeout(ctx, 2*AnswerWithin)
	defer cancel()
	sent := time.Now()
	no, err := app.Order(tctx, p.sl.ID, p.item, int(p.qty), "")
	s.r.answeredIn(ctx, what, time.Since(sent), statusOf(err, 202))
	s.r.tally(func(rep *Report) { rep.Room.Probes++ })
	switch {
	case err == nil:
		s.r.led.answer(what + " 202")
		s.r.led.accepted(p.sl, no, p.user, p.qty, "", s.r.since())
		s.r.fail("sale %d has a waiting room and accepted order %s of user %d without an admission token", p.sl.ID, no, p.user)
	case loadtest.IsAPIError(err, 403, "NOT_ADMITTED"):
		s.r.tally(func(rep *Report) { rep.Room.NotAdmitted++ })
		s.r.led.answer(what + " 403 NOT_ADMITTED")
	case loadtest.IsAPIError(err, 409, "SOLD_OUT"):
		s.r.tally(func(rep *Report) { rep.Room.ProbesSoldOut++ })
		s.r.led.answer(what + " 409 SOLD_OUT")
	case ctx.Err() == nil:
		s.r.led.answer(what + ": " + errAnswer(err))
	}
}

// admission joins p's sale's queue as p.user and waits until the place is
// final, on the stream (even shoppers) or polling at most a second apart
// (odd ones): the admission token, or "" — sold out, closed, the user's
// admission expired (admitted in an earlier round, it is not renewed), a
// wait given up on, the load's end. What fails as call's failures do (no
// answer, a 5xx: a fault) is tried again as call tries it, from a join
// when the place is gone (404 NOT_IN_QUEUE: the join's write lost in a
// failover, a queue's writes being unacknowledged by the replica); any
// other answer is a failure.
func (s *shopper) admission(ctx context.Context, app loadtest.Shopper, p flashPlan) string {
	id := p.sl.ID
	wctx, cancel := context.WithTimeout(ctx, roomWait)
	defer cancel()
	streamed := s.i%2 == 0
	polled := func(loadtest.Place) { s.r.tally(func(rep *Report) { rep.Room.Polls++ }) }
	var place loadtest.Place
	var refused error
	joined, waited := false, false
	retrying(wctx, func(int) (again bool) {
		var err error
		if !joined {
			place, err = s.join(wctx, app, id)
			joined = err == nil
		}
		if err == nil && !place.Final() {
			if !waited {
				waited = true
				s.r.tally(func(rep *Report) {
					if streamed {
						rep.Room.Streamed++
					} else {
						rep.Room.Polled++
					}
				})
			}
			if streamed {
				place, err = app.WaitStreaming(wctx, id, nil)
			} else {
				place, err = app.WaitPolling(wctx, id, place, time.Second, polled)
			}
		}
		var ae *loadtest.APIError
		switch {
		case err == nil:
			return false
		case loadtest.IsAPIError(err, 404, "NOT_IN_QUEUE"):
			joined = false
		case errors.As(err, &ae) && ae.Status < 500:
			refused = err
			return false
		}
		if wctx.Err() == nil {
			s.r.led.answer("retried: queue " + errAnswer(err))
		}
		return true
	})
	switch {
	case place.Status == "admitted":
		p.sl.admit(p.user)
		s.r.tally(func(rep *Report) { rep.Room.Admitted++ })
		return place.AdmissionToken
	case place.Status == "sold_out":
		s.r.tally(func(rep *Report) { rep.Room.SoldOut++ })
	case place.Status == "closed":
		s.r.tally(func(rep *Report) { rep.Room.Closed++ })
	case loadtest.IsAPIError(refused, 409, "ADMISSION_EXPIRED"):
		s.r.tally(func(rep *Report) { rep.Room.Expired++ })
	case refused != nil:
		s.r.fail("the waiting room of sale %d answered user %d %v", id, p.user, refused)
	case ctx.Err() == nil:
		s.r.tally(func(rep *Report) { rep.Room.GaveUp++ })
		s.r.led.answer(fmt.Sprintf("queue: gave up after %v", roomWait))
	}
	return ""
}

// join joins the queue of sale id, one try, bounded and timed as call's
// tries are.
func (s *shopper) join(ctx context.Context, app loadtest.Shopper, id int64) (loadtest.Place, error) {
	tctx, cancel := context.WithTimeout(ctx, 2*AnswerWithin)
	defer cancel()
	sent := time.Now()
	place, err := app.Join(tctx, id)
	s.r.answeredIn(ctx, "join", time.Since(sent), statusOf(err, 200))
	if err == nil {
		s.r.tally(func(rep *Report) { rep.Room.Joins++ })
	}
	return place, err
}

// statusOf is the HTTP status of a loadtest.Shopper call's outcome: ok
// when err is nil, 0 when no answer came.
func statusOf(err error, ok int) int {
	var ae *loadtest.APIError
	switch {
	case err == nil:
		return ok
	case errors.As(err, &ae):
		return ae.Status
	}
	return 0
}

// errAnswer names a failed call's answer as the ledger counts answers:
// "503 UNAVAILABLE", or "no answer".
func errAnswer(err error) string {
	if st := statusOf(err, 0); st > 0 {
		var ae *loadtest.APIError
		errors.As(err, &ae)
		return strconv.Itoa(st) + " " + ae.Code
	}
	return "no answer"
}

// checkAdmitted checks, once settled, that every order of a sale behind a
// waiting room is a user's the service told admitted: the shoppers send
// tokens only they were given, so an order of anyone else was accepted
// without an admission — whether or not its answer was lost.
func (r *run) checkAdmitted(ctx context.Context) error {
	for _, s := range r.sales.every() {
		if s.Room == 0 {
			continue
		}
		rows, err := r.db.QueryContext(ctx, `SELECT DISTINCT user_id FROM orders WHERE activity_id = ?`, s.ID)
		if err != nil {
			return fmt.Errorf("soak: the waiting room's orders: %w", err)
		}
		var users, strangers int
		var first int64
		for rows.Next() {
			var user int64
			if err := rows.Scan(&user); err != nil {
				rows.Close()
				return err
			}
			if users++; !s.wasAdmitted(user) {
				if strangers++; strangers == 1 {
					first = user
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		r.rep.Checks++
		r.rep.Room.Accepted += r.led.acceptedIn(s.ID)
		if strangers > 0 {
			r.fail("at the end, sale %d: %d of the %d users with orders were never admitted by its waiting room (user %d the first)", s.ID, strangers, users, first)
		}
	}
	return nil
}
