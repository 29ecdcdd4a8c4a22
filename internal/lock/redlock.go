package lock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redlock is the lock over N independent Redis nodes (Antirez's Redlock):
// held when a majority, N/2+1, agreed within the lock's validity.
//
// The nodes are asked in parallel, each with a timeout much smaller than the
// ttl (NodeTimeout, at most ttl/10). The lock is valid for
// ttl − elapsed − drift, measured from when the first request was sent; if no
// majority agreed in time it is released on every node at once. With a
// minority of nodes down it works; with a majority down it fails with
// ErrNoQuorum. Renewal needs a majority too.
//
// Fencing: every node mints its own fence; the lock's fence is the largest
// over its majority, and a second round raises a majority of the nodes'
// counters to it before the lock is handed out. Any later majority shares a
// node with that one, so every later fence is larger.
//
// Limits (Kleppmann, "How to do distributed locking", 2016): Redlock assumes
// bounded network delay, process pauses and clock drift. A holder paused past
// its validity, or a node that restarts without persistence and forgets a
// lock, can let two holders overlap. Lost and the fence are the defence:
// where correctness matters, the resource must check the fence.
type Redlock struct {
	nodes       []*Client
	quorum      int
	cfg         Config
	nodeTimeout time.Duration
	quorumWait  time.Duration
}

// RedlockConfig adds Redlock's settings to Config.
type RedlockConfig struct {
	Config
	// NodeTimeout bounds each node's answer; it is further capped at ttl/10.
	// Default 50ms.
	NodeTimeout time.Duration
	// QuorumWait is how long Obtain keeps retrying rounds in which no
	// majority of nodes answered (a node restarting, a pause, a machine so
	// loaded that answers miss NodeTimeout) before it gives up with
	// ErrNoQuorum. Default 10 × NodeTimeout. TryObtain never retries.
	QuorumWait time.Duration
}

// NewRedlock returns a Redlock over nodes: independent Redis servers, not
// replicas of one another. It takes at least one node; use an odd number.
func NewRedlock(nodes []redis.UniversalClient, cfg RedlockConfig) *Redlock {
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 50 * time.Millisecond
	}
	if cfg.QuorumWait <= 0 {
		cfg.QuorumWait = 10 * cfg.NodeTimeout
	}
	r := &Redlock{quorum: len(nodes)/2 + 1, cfg: cfg.Config.withDefaults(), nodeTimeout: cfg.NodeTimeout, quorumWait: cfg.QuorumWait}
	for _, n := range nodes {
		r.nodes = append(r.nodes, NewClient(n, cfg.Config))
	}
	return r
}

// Close closes the per-node release subscriptions.
func (r *Redlock) Close() error {
	var errs []error
	for _, n := range r.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

func (r *Redlock) check(key string, ttl time.Duration, opts []Option) (options, error) {
	if len(r.nodes) == 0 {
		return options{}, invalidf("redlock without nodes")
	}
	for _, n := range r.nodes {
		if n.rdb == nil {
			return options{}, invalidf("nil redis client among redlock nodes")
		}
	}
	return r.nodes[0].check(key, ttl, opts)
}

// TryObtain makes one round of requests. It returns an error wrapping
// ErrNotObtained when no majority agreed, or ErrNoQuorum when no majority
// answered.
func (r *Redlock) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer r.cfg.timeObtain("redlock", opts, time.Now(), &l, &err)
	o, err := r.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, pttl, err := r.attempt(ctx, key, ttl, o, false)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, notObtained(key, pttl)
	}
	return l, nil
}

// Obtain takes key, waiting as long as ctx allows. Rounds in which no
// majority of nodes answered are retried for QuorumWait, with jitter, and
// then Obtain fails with ErrNoQuorum: a dead majority is reported quickly,
// a blip is ridden out.
//
// Learned the hard way: failing on the first such round made Obtain fail
// under CPU load (CI with -race), where a healthy node's answer can miss a
// 50ms NodeTimeout; go-redis also drops a connection whose command hit the
// deadline, so the next round pays for reconnecting too.
func (r *Redlock) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer r.cfg.timeObtain("redlock", opts, time.Now(), &l, &err)
	o, err := r.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	var outage time.Time // start of the current run of rounds without a majority of answers
	// wait says how long to sleep before the next round, or the error to
	// return.
	wait := func(pttl int64, err error) (time.Duration, error) {
		switch {
		case err == nil:
			outage = time.Time{}
			return r.nodes[0].recheckAfter(pttl), nil
		case !errors.Is(err, ErrNoQuorum):
			return 0, err
		case outage.IsZero():
			outage = time.Now()
		case time.Since(outage) >= r.quorumWait:
			return 0, err
		}
		return r.nodeTimeout + mrand.N(r.nodeTimeout+time.Millisecond), nil
	}
	l, pttl, err := r.attempt(ctx, key, ttl, o, true)
	if l != nil {
		return l, nil
	}
	first, err := wait(pttl, err)
	if err != nil {
		return nil, err
	}
	// Listen for releases on every node that answers in time; a node that
	// does not only costs the recheck interval.
	wake := make(chan struct{}, 1)
	channel := newRedlockKeys(r.cfg.Prefix, key).channel
	var wg sync.WaitGroup
	var mu sync.Mutex
	var subs []func()
	for _, n := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := n.notify.subscribe(ctx, channel, r.nodeTimeout)
			if err != nil {
				return
			}
			n.notify.watchAny(s, wake)
			mu.Lock()
			subs = append(subs, func() { n.notify.unwatchAny(s, wake); n.notify.unsubscribe(s) })
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, unsub := range subs {
			unsub()
		}
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// After contention the next attempt comes at once, now that releases
	// are heard; after a round without a majority, a pause (with jitter)
	// comes first, as between later rounds.
	var pause time.Duration
	if !outage.IsZero() {
		pause = first
	}
	for {
		if pause > 0 {
			timer.Reset(pause)
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				return nil, canceled(ctx.Err())
			}
		}
		select {
		case <-wake:
		default:
		}
		l, pttl, err = r.attempt(ctx, key, ttl, o, true)
		if l != nil {
			return l, nil
		}
		if pause, err = wait(pttl, err); err != nil {
			return nil, err
		}
	}
}

// nodeResult is one node's answer to one request.
type nodeResult struct {
	ok  bool  // obtained / refreshed / released
	val int64 // fence when obtained; pttl when held
	err error
}

// eachNode runs f on every node in parallel, each under its own timeout.
func (r *Redlock) eachNode(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int, n *Client) nodeResult) []nodeResult {
	out := make([]nodeResult, len(r.nodes))
	var wg sync.WaitGroup
	for i, n := range r.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i] = f(nctx, i, n)
		}()
	}
	wg.Wait()
	return out
}

// timeoutFor is the per-node timeout for a lock of ttl: much smaller than it.
func (r *Redlock) timeoutFor(ttl time.Duration) time.Duration {
	return max(time.Millisecond, min(r.nodeTimeout, ttl/10))
}

// attempt makes one round: obtain on every node, then raise the fence on the
// majority. It returns the lock, or nil and the shortest remaining ttl
// reported by a holding node. A waiting attempt marks the key waited for on
// the nodes that refuse, so their releases publish a notice.
func (r *Redlock) attempt(ctx context.Context, key string, ttl time.Duration, o options, waiting bool) (*Lock, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	keys := newRedlockKeys(r.cfg.Prefix, key)
	timeout := r.timeoutFor(ttl)
	marker := int64(0)
	if waiting {
		marker = (2 * r.cfg.RecheckInterval).Milliseconds()
	}
	start := time.Now()
	value := newToken() + metaSep + r.nodes[0].pid + metaSep + strconv.FormatInt(start.UnixMilli(), 10) +
		metaSep + r.cfg.Host + metaSep + o.label
	res := r.eachNode(ctx, timeout, func(ctx context.Context, _ int, n *Client) nodeResult {
		v, err := obtainScript.Run(ctx, n.rdb, []string{keys.lock, keys.fence, keys.waiting},
			value, ttl.Milliseconds(), r.cfg.FenceRetention.Milliseconds(), 1, marker).Int64Slice()
		if err != nil || len(v) != 2 {
			return nodeResult{err: fmt.Errorf("obtain: %v %w", v, err)}
		}
		return nodeResult{ok: v[0] == 1, val: v[1]}
	})
	var fence, pttl int64 = 0, -1
	okNodes := make([]bool, len(r.nodes))
	obtained, answered := 0, 0
	var firstErr error
	for i, x := range res {
		switch {
		case x.err != nil:
			firstErr = cmp(firstErr, x.err)
		case x.ok:
			answered++
			obtained++
			okNodes[i] = true
			fence = max(fence, x.val)
		default:
			answered++
			if pttl < 0 || (x.val >= 0 && x.val < pttl) {
				pttl = x.val
			}
		}
	}
	if obtained >= r.quorum && r.stillValid(start, ttl) {
		raised := 0
		for _, x := range r.eachNode(ctx, timeout, func(ctx context.Context, i int, n *Client) nodeResult {
			if !okNodes[i] {
				return nodeResult{}
			}
			err := raiseFenceScript.Run(ctx, n.rdb, []string{keys.fence}, fence, r.cfg.FenceRetention.Milliseconds()).Err()
			return nodeResult{ok: err == nil, err: err}
		}) {
			if x.ok {
				raised++
			}
		}
		if raised >= r.quorum && r.stillValid(start, ttl) {
			h := &redlockHold{r: r, keys: keys, value: value}
			ls := startLease(h, r.cfg.observer("redlock", o), ttl, o, start, nil)
			return &Lock{since: time.Now(), key: key, fence: fence, lost: ls.lost, lease: ls, hold: h}, 0, nil
		}
	}

	// Not held: undo whatever we got, on every node (an answer that timed
	// out may still have set the key).
	r.releaseEverywhere(keys, value, timeout)
	if answered < r.quorum {
		if ended(ctx) {
			return nil, 0, canceled(ctxErr(ctx))
		}
		return nil, 0, fmt.Errorf("%w (%w): %d of %d nodes answered: %w", ErrNoQuorum, ErrUnavailable, answered, len(r.nodes), firstErr)
	}
	r.cfg.observer("redlock", o).contended()
	if pttl < 0 {
		pttl = 0 // held by nobody in particular: a split vote; retry soon
	}
	return nil, pttl, nil
}

func (r *Redlock) stillValid(start time.Time, ttl time.Duration) bool {
	return time.Since(start) < ttl-drift(ttl)
}

func (r *Redlock) releaseEverywhere(keys mutexKeys, value string, timeout time.Duration) {
	r.eachNode(context.Background(), timeout, func(ctx context.Context, _ int, n *Client) nodeResult {
		_, err := (&mutexOps{c: n, keys: keys, value: value}).release(ctx)
		return nodeResult{err: err}
	})
}

func cmp(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// redlockHold is one hold of a Redlock.
type redlockHold struct {
	r     *Redlock
	keys  mutexKeys
	value string
}

// refresh renews on every node; it holds with a majority renewed, and is
// lost when too many nodes say it is not theirs for a majority to remain.
func (h *redlockHold) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	res := h.r.eachNode(ctx, h.r.timeoutFor(ttl), func(ctx context.Context, _ int, n *Client) nodeResult {
		ok, err := (&mutexOps{c: n, keys: h.keys, value: h.value}).refresh(ctx, ttl)
		return nodeResult{ok: ok, err: err}
	})
	renewed, refused := 0, 0
	var firstErr error
	for _, x := range res {
		switch {
		case x.err != nil:
			firstErr = cmp(firstErr, x.err)
		case x.ok:
			renewed++
		default:
			refused++
		}
	}
	switch {
	case renewed >= h.r.quorum:
		return true, nil
	case len(h.r.nodes)-refused < h.r.quorum:
		return false, nil
	default:
		return false, fmt.Errorf("%w: %d of %d nodes renewed: %w", ErrNoQuorum, renewed, len(h.r.nodes), firstErr)
	}
}

func (h *redlockHold) release(ctx context.Context, l *Lock) error {
	if err := l.lease.stop(ctx); err != nil {
		return err
	}
	res := h.r.eachNode(ctx, h.r.timeoutFor(l.lease.ttl), func(ctx context.Context, _ int, n *Client) nodeResult {
		v, err := (&mutexOps{c: n, keys: h.keys, value: h.value}).release(ctx)
		return nodeResult{ok: v > 0, err: err}
	})
	released, answered := 0, 0
	var firstErr error
	for _, x := range res {
		if x.err != nil {
			firstErr = cmp(firstErr, x.err)
			continue
		}
		answered++
		if x.ok {
			released++
		}
	}
	switch {
	case released >= h.r.quorum && !l.isLost():
		return nil
	case answered < h.r.quorum:
		return fmt.Errorf("%w (%w): %d of %d nodes answered the release: %w", ErrNoQuorum, ErrUnavailable, answered, len(h.r.nodes), firstErr)
	default:
		l.lease.markLost()
		return ErrNotHeld
	}
}

// Holder reports who holds key on a majority of the nodes (the largest
// fence among them), or ErrNotHeld; ErrNoQuorum when too few nodes answer.
func (r *Redlock) Holder(ctx context.Context, key string) (Holder, error) {
	if _, err := r.check(key, time.Second, nil); err != nil {
		return Holder{}, err
	}
	keys := newRedlockKeys(r.cfg.Prefix, key)
	type answer struct {
		value string
		fence int64
		ttl   time.Duration
	}
	answers := make([]*answer, len(r.nodes))
	res := r.eachNode(ctx, r.nodeTimeout, func(ctx context.Context, i int, n *Client) nodeResult {
		var val, fence *redis.StringCmd
		var pttl *redis.DurationCmd
		_, err := n.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			val, fence, pttl = p.Get(ctx, keys.lock), p.Get(ctx, keys.fence), p.PTTL(ctx, keys.lock)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nodeResult{err: err}
		}
		f, _ := fence.Int64()
		answers[i] = &answer{value: val.Val(), fence: f, ttl: pttl.Val()}
		return nodeResult{ok: true}
	})
	votes := map[string]int{}
	answered := 0
	for i, x := range res {
		if x.ok {
			answered++
			if answers[i].value != "" {
				votes[answers[i].value]++
			}
		}
	}
	if answered < r.quorum {
		return Holder{}, fmt.Errorf("%w (%w): %d of %d nodes answered", ErrNoQuorum, ErrUnavailable, answered, len(r.nodes))
	}
	for value, n := range votes {
		if n < r.quorum {
			continue
		}
		h := parseHolder(value, -1)
		for _, a := range answers {
			if a != nil && a.value == value {
				h.Fence = max(h.Fence, a.fence)
				if h.TTL < 0 || a.ttl < h.TTL {
					h.TTL = a.ttl
				}
			}
		}
		return h, nil
	}
	return Holder{}, ErrNotHeld
}
