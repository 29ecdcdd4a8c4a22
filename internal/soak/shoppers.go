package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
)

// users is how many shoppers' accounts the crowd shares.
const users = 3000

// mintTokens issues every user's token; tokens[u] is user u's.
func mintTokens(secret string, ttl time.Duration) ([]string, error) {
	t, err := auth.New(secret)
	if err != nil {
		return nil, err
	}
	out := make([]string, users+1)
	for u := int64(1); u <= users; u++ {
		if out[u], err = t.Issue(u, ttl); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shopper is one client app of the crowd, acting for a random user each
// round. Two in three shop flash sales, one in three group buys. Its
// decisions come from its own seeded rng, drawn in its own goroutine; a
// pay or cancel a few seconds later runs in a follow-up goroutine with its
// decisions drawn beforehand.
type shopper struct {
	r      *run
	i      int
	rng    *rand.Rand
	tokens []string
	hc     *http.Client
	seq    int
	group  bool
	later  sync.WaitGroup
}

func newShopper(r *run, i int, rng *rand.Rand, tokens []string) *shopper {
	return &shopper{r: r, i: i, rng: rng, tokens: tokens, group: i%3 == 2,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}}
}

// run shops until ctx ends; follow-ups end with it too.
func (s *shopper) run(ctx context.Context) {
	defer s.later.Wait()
	for ctx.Err() == nil {
		if s.group {
			s.groupRound(ctx)
		} else {
			s.flashRound(ctx)
		}
		sleep(ctx, s.between(100*time.Millisecond, 500*time.Millisecond))
	}
}

// flashRound places an order on a flash sale and then pays it (35%),
// cancels it (25%) or leaves it to time out (40%), a few seconds later. One
// order in twenty is a double tap: the same request twice at once. On a
// sale behind a waiting room the shopper queues for an admission first
// (roomRound).
func (s *shopper) flashRound(ctx context.Context) {
	sl := s.r.sales.pick(s.rng, "seckill")
	if sl.Room > 0 {
		s.roomRound(ctx, sl)
		return
	}
	s.placeFlash(ctx, s.drawFlash(sl))
}

// flashPlan is one flash-sale order's every decision, drawn in advance.
type flashPlan struct {
	sl        *sale
	user, qty int64
	item      string // a sale of items': the one ordered
	admission string // a sale behind a waiting room: the user's admission token
	key       string
	double    bool
	next      float64 // < 0.35 pay, < 0.60 cancel, else leave unpaid
	delay     time.Duration
}

func (s *shopper) drawFlash(sl *sale) flashPlan {
	p := flashPlan{sl: sl, user: 1 + s.rng.Int64N(users), qty: 1, key: s.key()}
	if s.rng.IntN(5) == 0 {
		p.qty = 1 + s.rng.Int64N(p.sl.Limit)
	}
	if sl.Items > 1 {
		p.item = loadtest.ItemSKU(s.rng.IntN(sl.Items))
	}
	p.double, p.next, p.delay = s.rng.IntN(20) == 0, s.rng.Float64(), s.between(0, 3*time.Second)
	return p
}

// placeFlash carries plan p out; it draws nothing, so a surge's orders run
// it at once from many goroutines.
func (s *shopper) placeFlash(ctx context.Context, p flashPlan) {
	path := fmt.Sprintf("/v1/activities/%d/orders", p.sl.ID)
	body := map[string]any{"quantity": p.qty}
	if p.item != "" {
		body["item"] = p.item
	}
	what := "place"
	if p.admission != "" {
		what = "admitted place" // counted apart in the answers
	}
	var twin answer
	var wg sync.WaitGroup
	if p.double {
		wg.Go(func() { twin, _ = s.callAdmitted(ctx, what, "POST", path, p.user, p.key, p.admission, body) })
	}
	a, ok := s.callAdmitted(ctx, what, "POST", path, p.user, p.key, p.admission, body)
	wg.Wait()
	s.record(ctx, p, a)
	if p.double {
		s.record(ctx, p, twin)
	}
	if p.double && a.status == 202 && twin.status == 202 && a.str("order_no") != twin.str("order_no") {
		s.r.fail("idempotency: user %d's double tap with key %s on sale %d got two orders, %s and %s",
			p.user, p.key, p.sl.ID, a.str("order_no"), twin.str("order_no"))
	}
	if !ok || a.status != 202 {
		return
	}
	no := a.str("order_no")
	s.r.led.accepted(p.sl, no, p.user, p.qty, "", s.r.since())
	switch {
	case p.next < 0.30:
		s.after(ctx, p.delay, func() { s.change(ctx, "pay", "pay", no, p.user, order.Paid) })
	case p.next < 0.33:
		// Paid outside the app's pay: the provider's own confirmation,
		// delivered, then delivered again (a replay).
		s.after(ctx, p.delay, func() { s.providerConfirms(ctx, no, p.user, false, 1) })
	case p.next < 0.35:
		// Paid twice over, by two payments at once (two apis with
		// different secrets, a shopper paying on two devices): one pays
		// the order, and its record names it; the other is given back.
		s.after(ctx, p.delay, func() { s.providerConfirms(ctx, no, p.user, false, 2) })
	case p.next < 0.60:
		s.after(ctx, p.delay, func() { s.change(ctx, "cancel", "cancel", no, p.user, order.Cancelled) })
	case p.next < 0.70:
		// Left unpaid, and the money comes after the payment timeout: a
		// late payment, which must be given back, once.
		s.after(ctx, payTTL+3*time.Second, func() { s.providerConfirms(ctx, no, p.user, true, 1) })
	}
}

// record puts a place into the history, unless the run was ending: a
// place cut short by the load's end says nothing.
func (s *shopper) record(ctx context.Context, p flashPlan, a answer) {
	if (ctx.Err() != nil && a.got < 0) || !p.sl.modelled() {
		return
	}
	code, _ := a.code()
	status := a.status
	if a.got < 0 {
		status = 0 // given up on: it may have run
	}
	s.r.hist.place(p.sl.ID, int64(s.i), saleIn{Kind: "place", User: p.user, Qty: p.qty, Key: p.key},
		saleOut{Status: status, Code: code, No: a.str("order_no")}, a.sent, a.got)
}

// surge places n orders at once on sale sl, each as placeFlash, and
// returns at once: a flash crowd's spike, which the faults use to kill an
// api while its in-memory relay holds tasks not yet sent (at the crowd's
// steady rate it rarely holds any). Its orders end with ctx, like the
// shopper's own.
func (s *shopper) surge(ctx context.Context, sl *sale, n int) {
	for range n {
		p := s.drawFlash(sl)
		s.later.Go(func() { s.placeFlash(ctx, p) })
	}
}

// groupRound joins a forming group of the group buy (65%, if one is
// listed) or opens one, then pays (75%), cancels (2.5%) or leaves the order
// unpaid; some groups fill and are paid in time, others fail.
func (s *shopper) groupRound(ctx context.Context) {
	sl := s.r.sales.pick(s.rng, "groupbuy")
	user, key := 1+s.rng.Int64N(users), s.key()
	join, next, delay := s.rng.Float64() < 0.65, s.rng.Float64(), s.between(0, 2500*time.Millisecond)
	body := map[string]any{"quantity": 1}
	var a answer
	var ok bool
	if join {
		list, lok := s.call(ctx, "list groups", "GET", fmt.Sprintf("/v1/activities/%d/groups?status=forming", sl.ID), user, "", nil)
		items, _ := list.body["items"].([]any)
		if !lok || len(items) == 0 {
			join = false
		} else {
			g, _ := items[s.rng.IntN(len(items))].(map[string]any)
			gid, _ := g["group_id"].(string)
			a, ok = s.call(ctx, "join", "POST", "/v1/groups/"+gid+"/join", user, key, body)
		}
	}
	if !join {
		a, ok = s.call(ctx, "open", "POST", fmt.Sprintf("/v1/activities/%d/groups", sl.ID), user, key, body)
	}
	if !ok || a.status != 202 {
		return
	}
	no := a.str("order_no")
	s.r.led.accepted(sl, no, user, 1, a.str("group_id"), s.r.since())
	switch {
	case next < 0.75:
		s.after(ctx, delay, func() { s.change(ctx, "group pay", "pay", no, user, order.Paid) })
	case next < 0.775:
		s.after(ctx, delay, func() { s.change(ctx, "group cancel", "cancel", no, user, order.Cancelled) })
	case next < 0.80:
		// Two payments at once: if the group fails, the one that paid is
		// refunded, and so is the other (a duplicate), each once.
		s.after(ctx, delay, func() { s.providerConfirms(ctx, no, user, false, 2) })
	}
}

// change pays or cancels (action) order no; label names it in the answer
// counts. A 200 confirms it. A 409 after a retry may be the first try's
// success (its answer lost to a killed api): the app then looks the order
// up, as a shopper's app would. A flash-sale pay refused — seconds into the
// order's ten — is logged with its times, as evidence: only a fault's
// delays could explain it.
func (s *shopper) change(ctx context.Context, label, action, no string, user int64, to order.Status) {
	start := s.r.since()
	a, ok := s.call(ctx, label, "POST", "/v1/orders/"+no+"/"+action, user, "", nil)
	if !ok {
		return
	}
	if a.status == 200 && a.str("status") == string(to) {
		// A pay's 200 is the order as it is after: paid when the provider
		// confirmed the money in time, else (its payment time ran out
		// meanwhile, the money refunded) not.
		s.r.led.confirmed(no, to)
		if sl := s.r.led.saleOf(no); sl != nil && sl.modelled() {
			s.r.hist.changed(sl.ID, int64(s.i), string(to), no, a.sent, a.got)
		}
		return
	}
	if a.status == 409 && a.tries > 1 {
		if g, ok := s.call(ctx, "get", "GET", "/v1/orders/"+no, user, "", nil); ok && g.status == 200 && g.str("status") == string(to) {
			s.r.led.confirmed(no, to)
			return
		}
	}
	if a.status == 409 && label == "pay" {
		_, msg := a.code()
		s.r.say("pay refused: order %s (user %d) accepted at t+%.1fs, paid at t+%.1fs, refused at t+%.1fs after %d tries: %s",
			no, user, s.r.led.acceptedAt(no).Seconds(), start.Seconds(), s.r.since().Seconds(), a.tries, msg)
	}
}

// answer is the service's last answer to a request.
type answer struct {
	status int
	body   map[string]any
	tries  int
	// sent is when the first try left, got when the answer came (since the
	// run's start; -1: none came), for the history.
	sent, got time.Duration
}

func (a answer) str(k string) string { v, _ := a.body[k].(string); return v }

// code is an error answer's code.
func (a answer) code() (code, message string) {
	e, _ := a.body["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

// call sends a request as user and retries, with the same body and
// Idempotency-Key, what a client app retries: no answer (a timeout, a
// connection cut by a killed api), a 5xx, and a 409 that says to try again
// (a lock held by the request's own earlier try). It gives up after 40
// tries (about a minute) or when ctx ends; ok is false then.
func (s *shopper) call(ctx context.Context, what, method, path string, user int64, key string, body any) (a answer, ok bool) {
	return s.callAdmitted(ctx, what, method, path, user, key, "", body)
}

// callAdmitted is call with an admission token (header Admission-Token,
// when not ""): an order on a sale behind a waiting room.
func (s *shopper) callAdmitted(ctx context.Context, what, method, path string, user int64, key, admission string, body any) (a answer, ok bool) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	a.sent, a.got = s.r.since(), -1
	ok = retrying(ctx, func(try int) (again bool) {
		a.tries = try + 1
		rctx, cancel := context.WithTimeout(ctx, 2*AnswerWithin) // a try cut here is late (AnswerWithin) as well as unanswered
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, method, s.r.stack.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+s.tokens[user])
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		if admission != "" {
			req.Header.Set("Admission-Token", admission)
		}
		sent := time.Now()
		resp, err := s.hc.Do(req)
		if err != nil {
			s.r.answeredIn(ctx, what, time.Since(sent), 0)
			if ctx.Err() == nil {
				s.r.led.answer("retried: no answer")
			}
			return true
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.r.answeredIn(ctx, what, time.Since(sent), resp.StatusCode)
		if err != nil {
			s.r.led.answer("retried: answer cut")
			return true
		}
		a.status, a.body = resp.StatusCode, nil
		_ = json.Unmarshal(data, &a.body)
		code, msg := a.code()
		if a.status >= 500 || (a.status == 409 && strings.Contains(msg, "try again")) {
			s.r.led.answer(strings.TrimSpace("retried: " + strconv.Itoa(a.status) + " " + code))
			return true
		}
		ans := strings.TrimSpace(what + " " + strconv.Itoa(a.status) + " " + code)
		if code == "CONFLICT" {
			ans += " (" + msg + ")" // the order's state: a handful of messages, each telling
		}
		s.r.led.answer(ans)
		a.got = s.r.since()
		return false
	})
	if !ok && ctx.Err() == nil {
		s.r.led.answer(what + ": gave up after 40 tries")
	}
	return a, ok
}

// retrying runs try until it says it is done, waiting before each try
// again as a client app waits (100 ms, doubled up to 2 s, with jitter). It
// gives up after 40 tries (about a minute) or when ctx ends: false then.
func retrying(ctx context.Context, try func(n int) (again bool)) bool {
	backoff := 100 * time.Millisecond
	for n := 0; n < 40 && ctx.Err() == nil; n++ {
		if n > 0 {
			sleep(ctx, backoff+time.Duration(rand.Int64N(int64(backoff)))) // jitter from the global rng: timing, not a decision
			backoff = min(2*backoff, 2*time.Second)
		}
		if !try(n) {
			return true
		}
	}
	return false
}

// after runs f after d in a follow-up goroutine, unless ctx ends first.
func (s *shopper) after(ctx context.Context, d time.Duration, f func()) {
	s.later.Go(func() {
		if sleep(ctx, d) {
			f()
		}
	})
}

// key is a fresh Idempotency-Key.
func (s *shopper) key() string {
	s.seq++
	return fmt.Sprintf("soak-%d-%d", s.i, s.seq)
}

// between is a duration drawn uniformly from [lo, hi).
func (s *shopper) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)))
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// providerConfirms plays the payment provider confirming n payments of
// order no at once (payments of their own ids, as ones made outside the
// app's pay would be; two: the order paid twice over): each signed webhook
// is delivered to the stack until it is answered 200, then delivered once
// more (a replay). On time the order must end paid, by one of them; late
// (after its timeout) it must stay cancelled, and the money is refunded —
// the money invariants check that, once settled, and that the order's
// live record names the payment that paid it.
func (s *shopper) providerConfirms(ctx context.Context, no string, user int64, late bool, n int) {
	g, ok := s.call(ctx, "get", "GET", "/v1/orders/"+no, user, "", nil)
	if !ok || g.status != 200 {
		return
	}
	amount, _ := g.body["amount_cents"].(float64)
	var wg sync.WaitGroup
	for i := range n {
		id := no
		if i > 0 {
			id = fmt.Sprintf("%s_%d", no, i)
		}
		ev := paysim.Event{ID: "soak_evt_" + id, Type: string(payment.PaymentSucceeded), PaymentID: "soak_pi_" + id,
			OrderNo: no, AmountCents: int64(amount), Currency: "cny", Created: time.Now().Unix()}
		wg.Go(func() { s.deliver(ctx, ev, late) })
	}
	wg.Wait()
	if late || ctx.Err() != nil {
		return
	}
	if g, ok := s.call(ctx, "get", "GET", "/v1/orders/"+no, user, "", nil); ok && g.status == 200 && g.str("status") == string(order.Paid) {
		s.r.led.confirmed(no, order.Paid)
	}
}

// deliver sends the signed webhook of ev to the stack until it is
// answered 200, then once more (a replay).
func (s *shopper) deliver(ctx context.Context, ev paysim.Event, late bool) {
	what := "webhook"
	if late {
		what = "late webhook"
	}
	// From the first delivery on the provider has taken the money, and
	// like Stripe it delivers the event until it is acknowledged — also
	// after the load has stopped (the faults are healed then; bounded all
	// the same). Until 2026-11-26 it gave up when the load ended, and a
	// late payment whose webhook had been refused by a throttled link was
	// never refunded: no provider does that. The replay is sent only while
	// the load lasts.
	keep, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for sent := 0; sent < 2; {
		dctx := keep
		if sent > 0 {
			if ctx.Err() != nil {
				break
			}
			dctx = ctx
		}
		err := s.r.provider.Deliver(dctx, s.r.stack.URL+"/webhooks/simulated", ev)
		if err != nil {
			s.r.led.answer("retried: " + what + " not delivered")
			if !sleep(dctx, 200*time.Millisecond+time.Duration(rand.Int64N(int64(800*time.Millisecond)))) { // timing: the global rng
				break
			}
			continue
		}
		s.r.led.answer(what + " 200")
		sent++
	}
}
