package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// CrowdRun is a crowd in front of a sale with a waiting room, as a launch
// brings one: shoppers arrive (some before the start), join, wait polling
// or streaming their place, and order with their admission the moment they
// are let in; the streaming ones then follow their order's stream.
type CrowdRun struct {
	URL    string
	Sale   int64
	Tokens []string // a shopper each, in the order they arrive
	// Stream is the share of shoppers who stream their place (GET
	// .../queue/events); the rest poll at the server's poll_after_seconds.
	Stream float64
	// ArriveOver spreads the arrivals evenly over this long (0: all at once).
	ArriveOver time.Duration
	// MaxPoll caps a poller's gap (0: the server's, up to 15 s).
	MaxPoll time.Duration
	// Units is what the sale sells: nothing should be admitted past it
	// (and its margin).
	Units int
	// Items: orders name item i%Items (ItemSKU) when more than 1.
	Items int
	// Deadline ends the crowd's wait (default 3 minutes): shoppers still
	// waiting then are counted.
	Deadline time.Duration
	// NoTokenProbes shoppers also try to order without their admission
	// first: each must be refused 403 NOT_ADMITTED.
	NoTokenProbes int
}

// CrowdResult is what the crowd saw.
type CrowdResult struct {
	Units                              int // CrowdRun's
	Shoppers, Joined, Streamed, Polled int
	Polls                              int64 // GET .../queue answered, after the joins
	Admitted                           int
	// Final places: sold out, closed, still waiting at the deadline, and
	// ADMISSION_EXPIRED (admitted, did not order in time).
	SoldOut, Closed, StillWaiting, Expired int
	Errors                                 map[string]int // what went wrong, by kind: none expected
	Orders                                 map[string]int64
	NoTokenRefused, NoTokenAccepted        int // the probes' answers: 403 NOT_ADMITTED, 202
	// Wait is from joining to seeing the admission, for those admitted.
	WaitP50, WaitP99, WaitMax time.Duration
	// AdmitRate is admissions a second, as the streaming shoppers saw them
	// (within a tick of the counter; a poller sees its admission up to a
	// poll interval late): their admissions' count over their span, scaled
	// by their share of the admitted — a uniform sample of the queue, the
	// early joiners being shuffled and the arrivals alternating. With no
	// streams, every shopper's, between the first and the last seen.
	AdmitRate float64
	// EstimateErrP50 and EstimateErrP90: |the wait the first estimate said −
	// the wait seen|, for those who joined after the start (before it, no
	// estimate is given), streaming (seeing their admission within a tick)
	// when any did.
	EstimateErrP50, EstimateErrP90 time.Duration
	// TellSoldOut*: from the last accepted order to a waiting shopper told
	// sold out, for pollers and streamers; LateTold: pollers told later
	// than their poll interval (and a second) after it.
	TellSoldOutPollMax, TellSoldOutStreamMax time.Duration
	LateTold                                 int
	// OrderEvent*: from an order's change (its event's timestamp: the
	// acceptance) to its event read on the order's stream, which the
	// streaming shoppers open as soon as their order is accepted.
	OrderEventP50, OrderEventP99, OrderEventMax time.Duration
	OrderEvents                                 int
	Seconds                                     float64
}

// shopperLog is one crowd shopper's story.
type shopperLog struct {
	joined, admitted, told time.Time
	firstEstimate          *float64
	lastPollAfter          float64
	final                  string
	streamed, probeRefused bool
	probeAccepted          bool
	order                  string // the order's answer: "202", "409 SOLD_OUT", …
	accepted               time.Time
	eventLags              []time.Duration
	err                    string
}

// RunCrowd runs c: every shopper joins at its arrival and waits until its
// place is final or the deadline passes.
func RunCrowd(ctx context.Context, c CrowdRun) (CrowdResult, error) {
	if c.Deadline == 0 {
		c.Deadline = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, c.Deadline)
	defer cancel()
	// One connection a waiting streamer, the pollers' reused: enough idle
	// ones that a poll seldom opens a new one.
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	logs := make([]shopperLog, len(c.Tokens))
	var polls int64
	var pollMu sync.Mutex
	countPoll := func() { pollMu.Lock(); polls++; pollMu.Unlock() }
	start := time.Now()
	var wg sync.WaitGroup
	streamEvery := 0
	if c.Stream > 0 {
		streamEvery = int(1 / c.Stream)
	}
	for i, tok := range c.Tokens {
		if c.ArriveOver > 0 {
			at := start.Add(time.Duration(int64(c.ArriveOver) * int64(i) / int64(len(c.Tokens))))
			if d := time.Until(at); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &logs[i]
			l.streamed = streamEvery > 0 && i%streamEvery == 0
			item := ""
			if c.Items > 1 {
				item = ItemSKU(i % c.Items)
			}
			crowdShopper(ctx, Shopper{Base: c.URL, Token: tok, HTTP: client}, c, l, item, i < c.NoTokenProbes, countPoll)
		}()
	}
	wg.Wait()
	return summarize(c, logs, polls, time.Since(start)), nil
}

// crowdShopper is one shopper of the crowd: join, wait, order.
func crowdShopper(ctx context.Context, s Shopper, c CrowdRun, l *shopperLog, item string, probe bool, countPoll func()) {
	p, err := s.Join(ctx, c.Sale)
	if err != nil {
		l.err = "join: " + errKind(err)
		return
	}
	l.joined = time.Now()
	l.firstEstimate = p.EstimatedWait
	l.lastPollAfter = p.PollAfter
	seen := func(p Place) {
		if p.Status == "waiting" {
			l.lastPollAfter = p.PollAfter
		}
	}
	if !p.Final() {
		if l.streamed {
			p, err = s.WaitStreaming(ctx, c.Sale, seen)
		} else {
			p, err = s.WaitPolling(ctx, c.Sale, p, c.MaxPoll, func(p Place) { countPoll(); seen(p) })
		}
	}
	l.told = time.Now()
	switch {
	case err == nil:
		l.final = p.Status
	case ctx.Err() != nil:
		l.final = "waiting"
		return
	case IsAPIError(err, 409, "ADMISSION_EXPIRED"):
		l.final = "expired"
		return
	default:
		l.err = "wait: " + errKind(err)
		return
	}
	if p.Status != "admitted" {
		return
	}
	l.admitted = l.told
	if probe {
		_, err := s.Order(ctx, c.Sale, item, 1, "")
		l.probeRefused = IsAPIError(err, 403, "NOT_ADMITTED")
		l.probeAccepted = err == nil
	}
	no, err := s.Order(ctx, c.Sale, item, 1, p.AdmissionToken)
	switch {
	case err == nil:
		l.order, l.accepted = "202", time.Now()
	default:
		l.order = errKind(err)
		return
	}
	if l.streamed {
		followOrder(ctx, s, no, l)
	}
}

// followOrder opens the order's stream as soon as the order is accepted and
// reads its first event, order.accepted (sent once the worker has committed
// the order), recording how long after the change (the event's timestamp:
// the acceptance) the shopper heard of it — the persistence's lag included.
func followOrder(ctx context.Context, s Shopper, no string, l *shopperLog) {
	_ = s.Events(ctx, "/v1/orders/"+no+"/events", "", func(e Event) bool {
		var body struct {
			Timestamp time.Time `json:"timestamp"`
		}
		if json.Unmarshal([]byte(e.Data), &body) != nil || body.Timestamp.IsZero() {
			return false
		}
		l.eventLags = append(l.eventLags, time.Since(body.Timestamp))
		return false // the first event is the one wanted; the order waits for payment
	})
}

// errKind names an error for counting: an API error's status and code, or
// the transport's failure.
func errKind(err error) string {
	if ae, ok := err.(*APIError); ok {
		return strings.TrimSpace(fmt.Sprintf("%d %s", ae.Status, ae.Code))
	}
	return "transport"
}

func summarize(c CrowdRun, logs []shopperLog, polls int64, took time.Duration) CrowdResult {
	r := CrowdResult{Units: c.Units, Shoppers: len(logs), Polls: polls, Errors: map[string]int{}, Orders: map[string]int64{}, Seconds: took.Seconds()}
	var waits, lags []time.Duration
	var estErr [2][]time.Duration // polling, streaming
	var admits [2][]time.Time
	var lastAccept time.Time
	for i := range logs {
		l := &logs[i]
		if l.err != "" {
			r.Errors[l.err]++
		}
		if l.joined.IsZero() {
			continue
		}
		r.Joined++
		if l.streamed {
			r.Streamed++
		} else {
			r.Polled++
		}
		switch l.final {
		case "admitted":
			r.Admitted++
			waits = append(waits, l.admitted.Sub(l.joined))
			k := 0
			if l.streamed {
				k = 1
			}
			admits[k] = append(admits[k], l.admitted)
			if l.firstEstimate != nil && *l.firstEstimate >= 0 {
				est := time.Duration(*l.firstEstimate * float64(time.Second))
				estErr[k] = append(estErr[k], (l.admitted.Sub(l.joined) - est).Abs())
			}
		case "sold_out":
			r.SoldOut++
		case "closed":
			r.Closed++
		case "waiting":
			r.StillWaiting++
		case "expired":
			r.Expired++
		}
		if l.order != "" {
			r.Orders[l.order]++
		}
		if l.accepted.After(lastAccept) {
			lastAccept = l.accepted
		}
		if l.probeRefused {
			r.NoTokenRefused++
		}
		if l.probeAccepted {
			r.NoTokenAccepted++
		}
		lags = append(lags, l.eventLags...)
	}
	// How soon the waiting heard of the sell-out: from the last unit's
	// acceptance (as its buyer saw it).
	for i := range logs {
		l := &logs[i]
		if l.final != "sold_out" || lastAccept.IsZero() {
			continue
		}
		d := max(l.told.Sub(lastAccept), 0)
		if l.streamed {
			r.TellSoldOutStreamMax = max(r.TellSoldOutStreamMax, d)
			continue
		}
		r.TellSoldOutPollMax = max(r.TellSoldOutPollMax, d)
		gap := time.Duration(l.lastPollAfter * float64(time.Second))
		if c.MaxPoll > 0 && gap > c.MaxPoll {
			gap = c.MaxPoll
		}
		if d > gap+time.Second {
			r.LateTold++
		}
	}
	r.WaitP50, r.WaitP99, r.WaitMax = quantile(waits, 0.5), quantile(waits, 0.99), quantile(waits, 1)
	errs := estErr[1]
	if len(errs) == 0 {
		errs = estErr[0]
	}
	r.EstimateErrP50, r.EstimateErrP90 = quantile(errs, 0.5), quantile(errs, 0.9)
	r.OrderEventP50, r.OrderEventP99, r.OrderEventMax = quantile(lags, 0.5), quantile(lags, 0.99), quantile(lags, 1)
	r.OrderEvents = len(lags)
	seen := admits[1]
	if len(seen) < 2 {
		seen = append(admits[0], admits[1]...)
	}
	if len(seen) > 1 {
		slices.SortFunc(seen, func(a, b time.Time) int { return a.Compare(b) })
		if span := seen[len(seen)-1].Sub(seen[0]); span > 0 {
			r.AdmitRate = float64(len(seen)-1) / span.Seconds() * float64(r.Admitted) / float64(len(seen))
		}
	}
	return r
}

// quantile is the q-quantile of ds (nearest rank; 0 for none).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Problems are the crowd's broken promises: an order accepted without an
// admission, more admitted than can be sold (with the admission's margin:
// a tenth), a poller told of the sell-out later than its poll interval, a
// shopper's error.
func (r CrowdResult) Problems() []string {
	units := r.Units
	var out []string
	if r.NoTokenAccepted > 0 {
		out = append(out, fmt.Sprintf("%d orders accepted without an admission", r.NoTokenAccepted))
	}
	if cap := units + (units+9)/10; units > 0 && r.Admitted > cap {
		out = append(out, fmt.Sprintf("%d admitted for %d units (at most %d)", r.Admitted, units, cap))
	}
	if r.LateTold > 0 {
		out = append(out, fmt.Sprintf("%d waiting pollers told of the sell-out later than their poll interval", r.LateTold))
	}
	for k, n := range r.Errors {
		out = append(out, fmt.Sprintf("%d shoppers: %s", n, k))
	}
	slices.Sort(out)
	return out
}

// String is the crowd's report for people.
func (r CrowdResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %d shoppers joined (%d streaming their place, %d polling: %d polls) in %.1f s\n",
		r.Joined, r.Streamed, r.Polled, r.Polls, r.Seconds)
	fmt.Fprintf(&b, "  admitted %d at %.1f a second (as the streams saw it); wait p50 %v p99 %v max %v; the first estimate off by p50 %v p90 %v\n",
		r.Admitted, r.AdmitRate, ms(r.WaitP50), ms(r.WaitP99), ms(r.WaitMax), ms(r.EstimateErrP50), ms(r.EstimateErrP90))
	fmt.Fprintf(&b, "  told sold out %d (after the last unit: pollers within %v, streams within %v), closed %d, admission expired %d, still waiting %d\n",
		r.SoldOut, ms(r.TellSoldOutPollMax), ms(r.TellSoldOutStreamMax), r.Closed, r.Expired, r.StillWaiting)
	fmt.Fprintf(&b, "  the admitted's orders: %s; without a token: %d refused 403 NOT_ADMITTED, %d accepted\n",
		answers(r.Orders), r.NoTokenRefused, r.NoTokenAccepted)
	if r.OrderEvents > 0 {
		fmt.Fprintf(&b, "  order streams: %d changes pushed, from the change to the stream p50 %v p99 %v max %v\n",
			r.OrderEvents, ms(r.OrderEventP50), ms(r.OrderEventP99), ms(r.OrderEventMax))
	}
	return b.String()
}
