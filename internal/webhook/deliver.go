package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Deliverer makes deliveries' attempts, a batch of one endpoint's per
// call: it reads the endpoint (cached a second), holds to the endpoint's
// concurrency limit, sends, logs each attempt, and says what comes next.
// The task adapter (internal/tasks) runs it and schedules what it answers.
type Deliverer struct {
	endpoints Endpoints
	log       Attempts
	sender    *Sender
	cfg       DelivererConfig

	mu     sync.Mutex
	limits map[int64]*limit
	cache  map[int64]cachedEndpoint
}

// DelivererConfig tunes a Deliverer; the zero value gives the defaults in
// the comments.
type DelivererConfig struct {
	// Schedule is the waits between attempts. Default DefaultSchedule.
	Schedule Schedule
	// EndpointConcurrency is how many batches of attempts to one endpoint
	// run at once in this process, each sending one at a time
	// (WEBHOOK_ENDPOINT_CONCURRENCY). Default 8.
	EndpointConcurrency int
	// EndpointCache is how long an endpoint read is used: a change (a
	// rotation, a disable, a new URL) reaches deliveries within it.
	// Default 1s.
	EndpointCache time.Duration
	// Observe, if set, is told each call's outcome (OutcomeDelivered,
	// OutcomeFailed, OutcomeBusy, OutcomeDropped) and a sent attempt's
	// latency (0 when none was sent): the metrics.
	Observe func(outcome string, latency time.Duration)
	// Log is where disabling an endpoint is said. Default slog.Default().
	Log *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// The outcomes of a call to Deliver.
const (
	OutcomeDelivered = "delivered" // a 2xx came
	OutcomeFailed    = "failed"    // the attempt failed (retried, or the last)
	OutcomeBusy      = "busy"      // not attempted: the endpoint was at its limit
	OutcomeDropped   = "dropped"   // not attempted: the endpoint is gone or disabled
)

// Busy is DeliverBatch's answer when the endpoint was at its concurrency
// limit: nothing was sent, and the batch should come back After, which is
// not an attempt.
type Busy struct{ After time.Duration }

func (b *Busy) Error() string { return fmt.Sprintf("webhook: endpoint busy; again in %v", b.After) }

// NewDeliverer returns a Deliverer over the record of endpoints, the
// delivery log and sender.
func NewDeliverer(endpoints Endpoints, log Attempts, sender *Sender, cfg DelivererConfig) *Deliverer {
	if cfg.Schedule == nil {
		cfg.Schedule = DefaultSchedule
	}
	if cfg.EndpointConcurrency <= 0 {
		cfg.EndpointConcurrency = 8
	}
	if cfg.EndpointCache <= 0 {
		cfg.EndpointCache = time.Second
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string, time.Duration) {}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Deliverer{endpoints: endpoints, log: log, sender: sender, cfg: cfg,
		limits: map[int64]*limit{}, cache: map[int64]cachedEndpoint{}}
}

// Attempts is how many attempts a delivery gets.
func (d *Deliverer) Attempts() int { return d.cfg.Schedule.Attempts() }

// Retry is a delivery to try again After from now, as attempt
// Delivery.Attempt.
type Retry struct {
	Delivery
	After time.Duration
}

// DeliverBatch makes the next attempt of each of ds, deliveries to one
// endpoint, one after the other, each ds[i].Attempt its attempt's number
// (1 the first). It holds one of the endpoint's places for the batch, and
// stops at the first attempt that fails: the endpoint is then likely down,
// so the rest are not tried now but follow the failed one's retry, as the
// same attempt. It returns what to try again and when — each failed
// attempt that has another coming, on the schedule, and those not tried —
// while a delivery that is over (delivered, its last attempt failed: the
// endpoint then disabled if it answered nothing but failures since the
// delivery began; or its endpoint gone or disabled) is not returned.
//
// Nothing was sent when it answers an error: *Busy when the endpoint was
// at its limit, an error wrapping ErrUnavailable when the record of
// endpoints could not be read; try the batch again (not an attempt).
func (d *Deliverer) DeliverBatch(ctx context.Context, ds []Delivery) ([]Retry, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	ep, err := d.endpoint(ctx, ds[0].EndpointID)
	if errors.Is(err, ErrNotFound) {
		for range ds {
			d.cfg.Observe(OutcomeDropped, 0)
		}
		return nil, nil // deleted: its deliveries end with it
	}
	if err != nil {
		return nil, err
	}
	if !ep.Enabled {
		d.dropDisabled(ds)
		return nil, nil
	}
	l := d.limitOf(ep.ID)
	after, ok := l.enter(ctx)
	if !ok {
		d.cfg.Observe(OutcomeBusy, 0)
		return nil, &Busy{After: after}
	}
	start := time.Now()
	defer func() { l.leave(time.Since(start)) }()
	for i, dv := range ds {
		n := max(dv.Attempt, 1)
		status, latency, sendErr := d.sender.Send(ctx, ep, dv)
		if sendErr == nil {
			l.delivered(d.cfg.Now())
			d.record(dv, n, status, latency, "", true)
			d.cfg.Observe(OutcomeDelivered, latency)
			continue
		}
		d.cfg.Observe(OutcomeFailed, latency)
		wait, more := d.cfg.Schedule.Wait(n)
		d.record(dv, n, status, latency, sendErr.Error(), !more)
		var retries []Retry
		if more {
			next := dv
			next.Attempt = n + 1
			retries = append(retries, Retry{Delivery: next, After: wait})
		} else if d.lastFailed(ctx, ep, dv) {
			d.dropDisabled(ds[i+1:])
			return nil, nil
		} else {
			wait, _ = d.cfg.Schedule.Wait(1) // the rest follow soon: the endpoint may take them
		}
		for _, rest := range ds[i+1:] {
			rest.Attempt = max(rest.Attempt, 1)
			retries = append(retries, Retry{Delivery: rest, After: wait})
		}
		return retries, nil
	}
	return nil, nil
}

// dropDisabled ends deliveries whose endpoint is disabled, saying so in
// the log.
func (d *Deliverer) dropDisabled(ds []Delivery) {
	for _, dv := range ds {
		d.record(dv, max(dv.Attempt, 1), 0, 0, "not sent: the endpoint is disabled", true)
		d.cfg.Observe(OutcomeDropped, 0)
	}
}

// lastFailed disables ep when the last attempt of dv failed and ep
// answered no 2xx to anything since dv began: every attempt of a whole
// schedule, more than a day of them by default, failed;
// and says whether it did.
func (d *Deliverer) lastFailed(ctx context.Context, ep Endpoint, dv Delivery) bool {
	if !d.limitOf(ep.ID).deliveredAt().Before(dv.Since) {
		return false // here, and perhaps not yet in the log, which is written in the background
	}
	ok, err := d.log.DeliveredSince(ctx, ep.ID, dv.Since)
	if err != nil || ok {
		return false // unknown, or the endpoint works: it is this event it refuses
	}
	disabled, err := d.endpoints.DisableFailing(ctx, ep.ID)
	if err != nil {
		return false
	}
	d.forget(ep.ID)
	if disabled {
		d.cfg.Log.Warn("webhook endpoint disabled: every attempt of a whole retry schedule failed",
			"endpoint", ep.ID, "url", ep.URL, "since", dv.Since, "event", dv.EventID)
	}
	return true // disabled now, or by another worker meanwhile
}

func (d *Deliverer) record(dv Delivery, n, status int, latency time.Duration, why string, last bool) {
	d.log.Record(Attempt{
		EndpointID: dv.EndpointID, EventID: dv.EventID, Type: dv.Type, Number: n, Status: status,
		Latency: latency, Error: truncate(why, 255), At: d.cfg.Now(), Delivered: why == "", Last: last, Manual: dv.Manual,
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

type cachedEndpoint struct {
	ep   Endpoint
	read time.Time
}

// endpoint returns endpoint id as read at most EndpointCache ago.
func (d *Deliverer) endpoint(ctx context.Context, id int64) (Endpoint, error) {
	now := d.cfg.Now()
	d.mu.Lock()
	c, ok := d.cache[id]
	d.mu.Unlock()
	if ok && now.Sub(c.read) < d.cfg.EndpointCache {
		return c.ep, nil
	}
	ep, err := d.endpoints.Endpoint(ctx, id)
	if err != nil {
		return Endpoint{}, err
	}
	d.mu.Lock()
	d.cache[id] = cachedEndpoint{ep: ep, read: now}
	d.mu.Unlock()
	return ep, nil
}

func (d *Deliverer) forget(id int64) {
	d.mu.Lock()
	delete(d.cache, id)
	d.mu.Unlock()
}

func (d *Deliverer) limitOf(id int64) *limit {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.limits[id]
	if l == nil {
		l = &limit{places: make(chan struct{}, d.cfg.EndpointConcurrency)}
		d.limits[id] = l
	}
	return l
}

// limit is one endpoint's places in this process: a batch sends while it
// holds one. A batch that finds them all taken waits for one a short
// while, if not too many wait already (so an endpoint takes at most twice
// its places of the task server's slots, whatever its backlog); else, or
// when the wait runs out, it is turned away and told when to come back:
// its turn in a line of the batches turned away, served as fast as the
// endpoint's places free (each batch's time, the mean time a batch held its
// place, divided by the places). So a backlog comes back about when there
// is room for it and goes round the queue about once, instead of spinning
// through it: every turn costs Redis a retry, a forward and a dequeue.
// (Turned away at once, measured, a batch went round about eight times,
// 22 µs of Redis a delivery; make bench-deliveries, docs/benchmarks.md.)
type limit struct {
	places  chan struct{}
	waiting atomic.Int64

	mu      sync.Mutex
	latency time.Duration // exponentially weighted mean of the time a batch held its place
	line    time.Time     // when the last batch turned away is due
	lastOK  time.Time     // the last 2xx in this process
}

func (l *limit) delivered(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastOK = at
}

func (l *limit) deliveredAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastOK
}

// Bounds of the waits of a batch that finds its endpoint's places taken:
// in the process, at most maxPlaceWait (and about twice a batch's time);
// turned away, from minBusyWait to maxBusyWait. The longest is short: the
// pace is of an endpoint that may speed up at any moment (back from an
// outage, its answers were timeouts), and a delivery waiting past the
// moment there is room for it is late for nothing. (At 5 minutes, seen in
// make test-webhooks, the last of 40,373 events came 6 minutes after the
// rest.)
const (
	maxPlaceWait = time.Second
	minBusyWait  = 50 * time.Millisecond
	maxBusyWait  = 30 * time.Second
)

// enter takes a place, waiting for one a short while; or says how long to
// wait before trying again.
func (l *limit) enter(ctx context.Context) (time.Duration, bool) {
	select {
	case l.places <- struct{}{}:
		return 0, true
	default:
	}
	if l.waiting.Add(1) <= int64(cap(l.places)) {
		l.mu.Lock()
		wait := min(max(2*l.latency, 10*time.Millisecond), maxPlaceWait)
		l.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case l.places <- struct{}{}:
			t.Stop()
			l.waiting.Add(-1)
			return 0, true
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	l.waiting.Add(-1)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.line.Before(now) {
		l.line = now
	}
	l.line = l.line.Add(max(l.latency, time.Millisecond) / time.Duration(cap(l.places)))
	return min(max(jittered(l.line.Sub(now), 0.1), minBusyWait), maxBusyWait), false
}

// leave gives the place back, with how long the batch held it.
func (l *limit) leave(held time.Duration) {
	<-l.places
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.latency == 0 {
		l.latency = held
	} else {
		l.latency = (7*l.latency + held) / 8
	}
}
