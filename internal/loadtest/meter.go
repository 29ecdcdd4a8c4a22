package loadtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CPU is CPU time used over a window of a run: Redis's main thread (where
// commands and scripts run) and the api processes' (all threads; the local
// stack only). nginx, the workers and the load generators are left out.
type CPU struct {
	Redis time.Duration
	APIs  time.Duration
	// HasAPIs is false against a URL, whose processes are not ours to read.
	HasAPIs bool
	Seconds float64 // the window's length
}

// cpuMeter reads the counters a run's CPU figures come from.
type cpuMeter struct {
	rdb  redis.UniversalClient
	apis []*Proc // none against a URL
}

// read is the counters' values now.
func (m cpuMeter) read(ctx context.Context) (CPU, error) {
	r, err := RedisMainCPU(ctx, m.rdb)
	if err != nil {
		return CPU{}, err
	}
	c := CPU{Redis: r, HasAPIs: len(m.apis) > 0}
	for _, p := range m.apis {
		t, err := p.CPUTime()
		if err != nil {
			return CPU{}, err
		}
		c.APIs += t
	}
	return c, nil
}

// window runs f and returns the CPU used meanwhile.
func (m cpuMeter) window(ctx context.Context, f func()) (CPU, error) {
	before, err := m.read(ctx)
	if err != nil {
		return CPU{}, err
	}
	start := time.Now()
	f()
	after, err := m.read(ctx)
	if err != nil {
		return CPU{}, err
	}
	return CPU{Redis: after.Redis - before.Redis, APIs: after.APIs - before.APIs, HasAPIs: before.HasAPIs,
		Seconds: time.Since(start).Seconds()}, nil
}

// HeartbeatCost is what presence heartbeats alone cost, measured before
// the orders start: a window of heartbeats at the run's rate, less what
// the same length of the idle stack costs (workers polling their queues,
// the apis' background loops), measured just before it. The heartbeats
// come in at users/HeartbeatEvery a second, so the batches are as large as
// that rate makes them; a bigger crowd shares more per batch.
type HeartbeatCost struct {
	Idle, Busy CPU
	Heartbeats Result // the window's
}

// per is a CPU time per heartbeat answered, the idle stack's share over
// the window taken away.
func (c HeartbeatCost) per(busy, idle time.Duration) time.Duration {
	n := c.Heartbeats.Codes["200"]
	if n == 0 || c.Idle.Seconds == 0 {
		return 0
	}
	extra := float64(busy) - float64(idle)*c.Busy.Seconds/c.Idle.Seconds
	return time.Duration(max(extra, 0) / float64(n))
}

// RedisPerHeartbeat is Redis main-thread time per heartbeat.
func (c HeartbeatCost) RedisPerHeartbeat() time.Duration { return c.per(c.Busy.Redis, c.Idle.Redis) }

// APIPerHeartbeat is the api processes' CPU per heartbeat (0 against a URL).
func (c HeartbeatCost) APIPerHeartbeat() time.Duration { return c.per(c.Busy.APIs, c.Idle.APIs) }

// measureHeartbeatCost waits out an idle window, then sends heartbeats
// (hb, from its Start) for as long again.
func measureHeartbeatCost(ctx context.Context, m cpuMeter, hb HeartbeatRun, window time.Duration) (*HeartbeatCost, error) {
	c := &HeartbeatCost{}
	var err error
	if c.Idle, err = m.window(ctx, func() {
		select {
		case <-ctx.Done():
		case <-time.After(window):
		}
	}); err != nil {
		return nil, err
	}
	var runErr error
	if c.Busy, err = m.window(ctx, func() {
		wctx, cancel := context.WithTimeout(ctx, window)
		defer cancel()
		c.Heartbeats, runErr = RunHeartbeats(wctx, hb)
	}); err != nil {
		return nil, err
	}
	return c, runErr
}

// perRequest is d shared over n, for people.
func perRequest(d time.Duration, n int64) string {
	if n <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)/float64(n))
}

// writeCPU writes the CPU figures of the wrk run and of the heartbeats.
func (r Report) writeCPU(b *strings.Builder) {
	if r.HeartbeatCost != nil {
		c := r.HeartbeatCost
		fmt.Fprintf(b, "  cost of a heartbeat, measured alone before the orders (%d answered 200 in %.1f s, less %.1f s idle): Redis main thread %s",
			c.Heartbeats.Codes["200"], c.Busy.Seconds, c.Idle.Seconds, perRequest(c.RedisPerHeartbeat(), 1))
		if c.Busy.HasAPIs {
			fmt.Fprintf(b, ", apis %s", perRequest(c.APIPerHeartbeat(), 1))
		}
		fmt.Fprintf(b, " (idle stack: Redis %.1f ms/s", float64(c.Idle.Redis.Microseconds())/1000/max(c.Idle.Seconds, 1e-9))
		if c.Idle.HasAPIs {
			fmt.Fprintf(b, ", apis %.0f ms/s", float64(c.Idle.APIs.Milliseconds())/max(c.Idle.Seconds, 1e-9))
		}
		b.WriteString(")\n")
	}
	if r.WrkCPU == nil || len(r.Phases) == 0 {
		return
	}
	c := r.WrkCPU
	reqs := r.Phases[0].Result.Requests
	what := "wrk's requests"
	if r.Heartbeats != nil {
		reqs += r.Heartbeats.Requests
		what = "wrk's requests and the heartbeats"
	}
	fmt.Fprintf(b, "CPU over the wrk run (%.1f s): Redis main thread %v, %s a request", c.Seconds, c.Redis.Round(time.Millisecond), perRequest(c.Redis, reqs))
	if c.HasAPIs {
		fmt.Fprintf(b, "; apis %v, %s a request", c.APIs.Round(10*time.Millisecond), perRequest(c.APIs, reqs))
	}
	fmt.Fprintf(b, " (%d requests: %s)\n", reqs, what)
}

// writeHeartbeats writes the heartbeats' answers and what presence holds.
func (r Report) writeHeartbeats(b *strings.Builder) {
	if r.Heartbeats == nil {
		return
	}
	h := r.Heartbeats
	fmt.Fprintf(b, "\npresence heartbeats during the wrk run: %d in %.1f s = %.0f a second; latency p50 %v  p99 %v  max %v; answers: %s",
		h.Requests, h.Seconds, h.RPS(), ms(h.P50), ms(h.P99), ms(h.Max), answers(h.Codes))
	if h.Errors > 0 {
		fmt.Fprintf(b, "; %d transport errors or timeouts", h.Errors)
	}
	fmt.Fprintf(b, "\n  presence in Redis after the run: %d clients online, %d bytes (%.0f per client)\n",
		r.PresenceOnline, r.PresenceBytes, float64(r.PresenceBytes)/float64(max(r.PresenceOnline, 1)))
}
