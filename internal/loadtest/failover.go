package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
)

// Failover is what a Redis primary killed in the middle of the load did
// (Config.KillPrimaryAfter): when, how long the sentinels took to promote a
// replica, and what a probe client saw — one order every probeEvery, each
// retried after a 5xx with its Idempotency-Key, as an app would.
type Failover struct {
	Old, Promoted string
	KilledAfter   time.Duration // into the wrk run
	PromotedAfter time.Duration // from the kill
	// Resumed is from the kill to the first 202 answer to a probe request
	// sent after it: the time shoppers could not buy.
	Resumed time.Duration
	// Probe counts: orders placed, 503 answers retried, and the slowest
	// single request.
	ProbeOrders, Probe503s int
	ProbeSlowest           time.Duration
}

// String is the failover for people.
func (f Failover) String() string {
	return fmt.Sprintf("primary %s killed -9 %v into the load; %s promoted %v later; the first order accepted %v after the kill "+
		"(a probe of %d orders saw %d answers 503, retried with their Idempotency-Key; slowest request %v)",
		f.Old, f.KilledAfter.Round(100*time.Millisecond), f.Promoted, ms(f.PromotedAfter), ms(f.Resumed),
		f.ProbeOrders, f.Probe503s, ms(f.ProbeSlowest))
}

const probeEvery = 50 * time.Millisecond

// probe places one order every probeEvery for users from user on, until
// ctx ends, and records when each was accepted.
type probe struct {
	base, token string
	activity    int64
	client      *http.Client

	mu       sync.Mutex
	accepted []answer // the requests that got a 202
	n, s503  int
	slowest  time.Duration
}

func newProbe(base, secret string, activity, user int64) (*probe, error) {
	t, err := auth.New(secret)
	if err != nil {
		return nil, err
	}
	p := &probe{base: base, activity: activity, client: &http.Client{Timeout: 15 * time.Second}}
	// One user for every probe order, limit permitting: the sale's limit is
	// the caller's; the probe asks for a sale of its own (runFailover).
	if p.token, err = t.Issue(user, 2*time.Hour); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *probe) run(ctx context.Context) {
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		p.order(ctx, fmt.Sprintf("probe-%d", i))
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

func (p *probe) order(ctx context.Context, key string) {
	sent := time.Now()
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("%s/v1/activities/%d/orders", p.base, p.activity),
			strings.NewReader(`{"quantity":1}`))
		req.Header.Set("Authorization", "Bearer "+p.token)
		req.Header.Set("Idempotency-Key", key)
		start := time.Now()
		resp, err := p.client.Do(req)
		took := time.Since(start)
		code := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		p.mu.Lock()
		p.slowest = max(p.slowest, took)
		if code == 503 {
			p.s503++
		}
		if code == 202 {
			p.n++
			p.accepted = append(p.accepted, answer{sent: sent, at: start.Add(took)})
		}
		p.mu.Unlock()
		if code != 0 && code < 500 {
			return
		}
		time.Sleep(200 * time.Millisecond)
		sent = time.Now()
	}
}

// answer is when a probe request was sent and when its answer came.
type answer struct{ sent, at time.Time }

// resumedAfter is from t to the first 202 answer to a request sent after
// t. (Not to the request's sending: one sent while the sentinels were
// still promoting waits in the api, up to REQUEST_TIMEOUT, and its 202
// comes after the promotion.)
func (p *probe) resumedAfter(t time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := time.Duration(-1)
	for _, a := range p.accepted {
		if a.sent.After(t) && (first < 0 || a.at.Sub(t) < first) {
			first = a.at.Sub(t)
		}
	}
	return first, first >= 0
}

// runFailover kills the stack's primary after delay, while the load runs,
// and measures with a probe on a sale of its own; it returns when ctx ends
// (the load is over) and the probe has seen the service back.
func runFailover(ctx context.Context, cfg Config, stack *Stack, delay time.Duration) (Failover, error) {
	f := Failover{KilledAfter: delay}
	sale, err := CreateSale(ctx, cfg.URL, cfg.AdminToken, Sale{Stock: 1_000_000, Limit: 10_000})
	if err != nil {
		return f, err
	}
	p, err := newProbe(cfg.URL, cfg.JWTSecret, sale, int64(cfg.Users)+1000)
	if err != nil {
		return f, err
	}
	pctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(pctx) }()
	defer func() { stop(); <-done }()

	select {
	case <-ctx.Done():
		return f, fmt.Errorf("loadtest: the load ended before the primary was killed")
	case <-time.After(delay):
	}
	kctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var killed time.Time
	if f.Old, f.Promoted, killed, f.PromotedAfter, err = stack.KillRedisPrimary(kctx); err != nil {
		return f, err
	}
	for {
		if d, ok := p.resumedAfter(killed); ok {
			f.Resumed = d
			break
		}
		if kctx.Err() != nil {
			return f, fmt.Errorf("loadtest: no order accepted within 2 minutes of killing the primary")
		}
		time.Sleep(50 * time.Millisecond)
	}
	<-ctx.Done()
	stop()
	<-done
	p.mu.Lock()
	f.ProbeOrders, f.Probe503s, f.ProbeSlowest = p.n, p.s503, p.slowest
	p.mu.Unlock()
	return f, nil
}
