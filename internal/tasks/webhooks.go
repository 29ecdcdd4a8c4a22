package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/webhook"
)

// The webhooks' task type and queue: deliveries run on a queue of their own,
// served by a task server of their own in the worker (app), so that a slow
// endpoint's deliveries never hold a slot an order's sync needs.
const (
	TypeWebhookDeliver = "webhook:deliver"
	WebhookQueueName   = "webhooks"
)

// BatchSize is how many deliveries to one endpoint a task carries. Every
// asynq task costs Redis about the same whatever it carries, and the
// deliveries' Redis is the order path's: a task a delivery cost 72 µs of
// its main thread a delivery, more than an order costs it; a batch of 32,
// 7 µs; of 64, 3.5 µs (make bench-deliveries, four endpoints, docs/
// benchmarks.md). A batch is sent one delivery after another in its
// endpoint's place, so it also bounds how long a slow endpoint's batch
// holds the place. No task is kept after it ran (asynq's Retention): a kept
// batch holds its bodies in Redis, and its TaskID would only refuse the
// batches of a dispatcher that died between queueing and marking them, a
// window of one MySQL update, whose second sending is a duplicate of the
// same ids, which at least once allows.
const BatchSize = 64

// deliveryBatch is a batch of deliveries to one endpoint in a task. The
// bodies are the events' JSON, carried as they are.
type deliveryBatch struct {
	Endpoint int64          `json:"ep"`
	Items    []deliveryItem `json:"i"`
}

type deliveryItem struct {
	Event   string          `json:"ev"`
	Type    webhook.Type    `json:"t"`
	Body    json.RawMessage `json:"b"`
	Since   time.Time       `json:"s"`
	Attempt int             `json:"n"`
	Manual  bool            `json:"m,omitempty"`
}

// WebhookQueue queues deliveries on asynq, durably (webhook.Queue), in
// batches of one endpoint's.
type WebhookQueue struct {
	c   *asynq.Client
	rdb redis.UniversalClient
}

var _ webhook.Queue = (*WebhookQueue)(nil)

// NewWebhookQueue returns a WebhookQueue that queues with c and lists
// the tasks (Held) on rdb, c's Redis.
func NewWebhookQueue(c *asynq.Client, rdb redis.UniversalClient) *WebhookQueue {
	return &WebhookQueue{c: c, rdb: rdb}
}

// Deliver queues ds, in order, as tasks of up to BatchSize deliveries of
// one endpoint, each with the TaskID "whd:<endpoint>:<first event>:<hash of
// every event of the batch>" (an admin's redelivery, Manual:
// "whr:<endpoint>:<event>:<time>"; a recovery's page:
// "whv:<endpoint>:<first event>"), so that the same batch queued again is
// refused while the first waits or runs.
//
// The hash, not the first event alone: a dispatcher that reads the outbox
// again (its mark failed, its lock lost) may read a batch shaped
// otherwise — the worker's transactions commit out of their rows' order, so
// an event committed late sorts among those read before — and a batch
// refused for its first event alone lost the others in it, marked
// dispatched yet never queued. A batch of another shape is queued: its
// events read before go out twice, with their ids (at least once).
func (q *WebhookQueue) Deliver(ctx context.Context, ds []webhook.Delivery) error {
	var order []int64
	byEndpoint := map[int64][]webhook.Delivery{}
	for _, d := range ds {
		if _, ok := byEndpoint[d.EndpointID]; !ok {
			order = append(order, d.EndpointID)
		}
		byEndpoint[d.EndpointID] = append(byEndpoint[d.EndpointID], d)
	}
	for _, ep := range order {
		all := byEndpoint[ep]
		for i := 0; i < len(all); i += BatchSize {
			b := all[i:min(i+BatchSize, len(all))]
			id := "whd:" + strconv.FormatInt(ep, 10) + ":" + b[0].EventID + ":" + batchHash(b)
			switch {
			case b[0].Manual:
				id = "whr:" + strconv.FormatInt(ep, 10) + ":" + b[0].EventID + ":" + strconv.FormatInt(b[0].Since.UnixNano(), 10)
			case b[0].Repair:
				// A repair's batch (webhook.Repairer): a second repair while
				// the first's batch waits finds it held anyway; the prefix
				// tells it apart in asynq's listings.
				id = "whx:" + strconv.FormatInt(ep, 10) + ":" + b[0].EventID + ":" + batchHash(b)
			case b[0].Recovery:
				// A recovery's page (webhook.Service.Recover): the same page
				// queued again while the first waits is refused, so a second
				// recovery does not double what is still pending.
				id = "whv:" + strconv.FormatInt(ep, 10) + ":" + b[0].EventID
			}
			if err := q.enqueue(ctx, id, 0, b); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ webhook.Holder = (*WebhookQueue)(nil)

// Held returns every delivery a task of the webhooks' queue holds: waiting
// for its time (scheduled, retry), queued, or running. asynq lists one state
// after another, not at one instant; they are read in the order a task
// moves through them, so a task that moves on while they are read is seen
// in the next. A batch's retry, queued as a new task when the running one
// ends, may still be missed: then both reads missed the delivery, and the
// repair queues it again, a duplicate of its ids.
func (q *WebhookQueue) Held(ctx context.Context) (map[webhook.Key]bool, error) {
	// asynq's inspector lists only the queues named in its set of queues,
	// and a client adds a queue's name there at its first enqueue only (it
	// remembers it did): after Redis lost its data, the queue has tasks
	// again and is in no set, so the inspector (and asynqmon) answer "no
	// such queue" until a new process enqueues. Named again here, as a
	// client's first enqueue would.
	if err := q.rdb.SAdd(ctx, "asynq:queues", WebhookQueueName).Err(); err != nil {
		return nil, fmt.Errorf("%w: name the webhooks' queue: %w", webhook.ErrUnavailable, err)
	}
	insp := asynq.NewInspectorFromRedisClient(q.rdb)
	held := map[webhook.Key]bool{}
	lists := []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
		insp.ListScheduledTasks, insp.ListRetryTasks, insp.ListPendingTasks, insp.ListActiveTasks}
	for _, list := range lists {
		for page := 1; ; page++ {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			ts, err := list(WebhookQueueName, asynq.PageSize(heldPage), asynq.Page(page))
			if errors.Is(err, asynq.ErrQueueNotFound) {
				break // nothing was ever queued
			}
			if err != nil {
				return nil, fmt.Errorf("%w: list delivery tasks: %w", webhook.ErrUnavailable, err)
			}
			for _, t := range ts {
				var b deliveryBatch
				if json.Unmarshal(t.Payload, &b) != nil {
					continue
				}
				for _, it := range b.Items {
					held[webhook.Key{EndpointID: b.Endpoint, EventID: it.Event}] = true
				}
			}
			if len(ts) < heldPage {
				break
			}
		}
	}
	return held, nil
}

// heldPage is how many tasks Held reads at a time.
const heldPage = 500

// batchHash is a short hash of b's event ids, in order.
func batchHash(b []webhook.Delivery) string {
	h := sha256.New()
	for _, d := range b {
		h.Write([]byte(d.EventID + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// enqueue queues the batch b of one endpoint's deliveries as the task id,
// due in after.
func (q *WebhookQueue) enqueue(ctx context.Context, id string, after time.Duration, b []webhook.Delivery) error {
	p := deliveryBatch{Endpoint: b[0].EndpointID, Items: make([]deliveryItem, len(b))}
	for i, d := range b {
		p.Items[i] = deliveryItem{Event: d.EventID, Type: d.Type, Body: d.Body, Since: d.Since, Attempt: max(d.Attempt, 1),
			Manual: d.Manual}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = q.c.EnqueueContext(ctx, asynq.NewTask(TypeWebhookDeliver, payload), asynq.Queue(WebhookQueueName),
		asynq.TaskID(id), asynq.ProcessIn(after), asynq.MaxRetry(maxRetry))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // queued already
	}
	if err != nil {
		return fmt.Errorf("%w: enqueue deliveries %s: %w", webhook.ErrUnavailable, id, err)
	}
	return nil
}

// WebhookWorker runs the delivery tasks.
type WebhookWorker struct {
	d *webhook.Deliverer
	q *WebhookQueue
}

// NewWebhookWorker returns the delivery tasks' handler over d, which
// queues what is to be tried again on q.
func NewWebhookWorker(d *webhook.Deliverer, q *WebhookQueue) *WebhookWorker {
	return &WebhookWorker{d: d, q: q}
}

// Register adds the handler to mux.
func (w *WebhookWorker) Register(mux *asynq.ServeMux) { mux.HandleFunc(TypeWebhookDeliver, w.Handle) }

// Handle makes the next attempt of each delivery of the batch, and queues
// what is to be tried again: one task (per wait: they share one), its
// TaskID from the batch's, and its first delivery's attempt and event
// (retryID), so that a batch run again (its worker killed) queues no
// second one while the first waits. The schedule is kept this way, not by
// asynq's retries, which a task has one count of: a batch's deliveries
// each have their own. asynq retries a batch only when nothing was sent
// (the endpoint at its limit: *webhook.Busy; its record unreadable), or
// its retries could not be queued (it then sends it again: at least once).
func (w *WebhookWorker) Handle(ctx context.Context, t *asynq.Task) error {
	var p deliveryBatch
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Endpoint == 0 || len(p.Items) == 0 {
		return fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	ds := make([]webhook.Delivery, len(p.Items))
	for i, it := range p.Items {
		ds[i] = webhook.Delivery{EndpointID: p.Endpoint, EventID: it.Event, Type: it.Type, Body: it.Body, Since: it.Since,
			Manual: it.Manual, Attempt: it.Attempt}
	}
	retries, err := w.d.DeliverBatch(ctx, ds)
	if err != nil {
		return err
	}
	self, _ := asynq.GetTaskID(ctx)
	// One task per wait (a batch's retries share one: the failed
	// delivery's, which the rest follow); each delivery keeps its own
	// attempt number in it.
	var order []time.Duration
	groups := map[time.Duration][]webhook.Delivery{}
	for _, r := range retries {
		if _, ok := groups[r.After]; !ok {
			order = append(order, r.After)
		}
		groups[r.After] = append(groups[r.After], r.Delivery)
	}
	// Queued even as the worker stops (its context ends then): what was
	// sent is logged, and a batch run again would send it twice.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, after := range order {
		g := groups[after]
		if err := w.q.enqueue(qctx, retryID(self, g[0].Attempt, g[0].EventID), after, g); err != nil {
			return err
		}
	}
	return nil
}

// retryID is the TaskID of a batch's retry: the batch's, the attempt's and
// its first delivery's, hashed to a fixed length (a retry's retry would
// grow it).
func retryID(task string, attempt int, firstEvent string) string {
	h := sha256.Sum256([]byte(task + "\n" + strconv.Itoa(attempt) + "\n" + firstEvent))
	return "whx:" + hex.EncodeToString(h[:12])
}

// WebhookIsFailure is the webhook task server's IsFailure: a batch sent
// back unsent (its endpoint at its limit, the record of endpoints
// unreachable) is not a failure; asynq's count is of batches whose
// retries could not be queued.
func WebhookIsFailure(err error) bool {
	var b *webhook.Busy
	return !errors.As(err, &b) && !errors.Is(err, webhook.ErrUnavailable)
}

// WebhookRetryDelay is the webhook task server's RetryDelayFunc: the wait
// the deliverer asked for (the endpoint's turn), or about a second.
func WebhookRetryDelay(_ int, err error, _ *asynq.Task) time.Duration {
	var b *webhook.Busy
	if errors.As(err, &b) {
		return b.After
	}
	return time.Duration(500+rand.IntN(1000)) * time.Millisecond
}

// WebhookDispatcher runs the webhook.Dispatcher in one worker at a time:
// the lock worker:webhooks, renewed while held, elects it.
type WebhookDispatcher struct {
	locks    lock.Locker
	d        *webhook.Dispatcher
	prune    *webhook.Retention
	interval time.Duration
	log      *slog.Logger
	// PruneEvery is how often the leader prunes the outbox and the
	// delivery log (prune). Default a minute.
	PruneEvery time.Duration

	repair   *webhook.Repairer
	identity func(context.Context) (string, error)
	window   time.Duration
	// IdentityEvery is how often the leader reads the identity of the
	// Redis it queues into. Default a second.
	IdentityEvery time.Duration
}

// Repairs makes the leader repair what a loss of Redis took (webhook.
// Repairer): when it begins to lead, and when identity — the run id of the
// Redis the deliveries are queued into (RedisIdentity) — changes, it queues
// again the deliveries queued within window before then that no task holds
// and no attempt ended (WEBHOOK_REPAIR_WINDOW). A repair that fails is
// tried again after the next pass.
func (r *WebhookDispatcher) Repairs(repair *webhook.Repairer, identity func(context.Context) (string, error), window time.Duration) {
	r.repair, r.identity, r.window = repair, identity, window
}

// NewWebhookDispatcher returns the dispatcher's runner; interval is the
// pause after a pass that found less than a full batch
// (WEBHOOK_DISPATCH_INTERVAL). prune, if not nil, is run by the leader
// every PruneEvery, between two passes.
func NewWebhookDispatcher(locks lock.Locker, d *webhook.Dispatcher, prune *webhook.Retention, interval time.Duration,
	log *slog.Logger) *WebhookDispatcher {
	return &WebhookDispatcher{locks: locks, d: d, prune: prune, interval: interval, log: log, PruneEvery: time.Minute,
		IdentityEvery: time.Second}
}

// Run leads when it can, until ctx ends (lead): while this worker holds
// the dispatcher's lock it dispatches, at once again after a full batch,
// else after the interval.
func (r *WebhookDispatcher) Run(ctx context.Context) {
	lead(ctx, r.locks, "worker:webhooks", "webhooks", r.log, func(ctx context.Context) {
		backoff := r.interval
		var pruned time.Time
		rep := r.repairs(ctx)
		for ctx.Err() == nil {
			rep.check(ctx)
			if r.prune != nil && time.Since(pruned) >= r.PruneEvery {
				pruned = time.Now()
				events, attempts, err := r.prune.Prune(ctx)
				if err != nil && ctx.Err() == nil {
					r.log.Warn("webhooks: prune failed; trying again later", "in", r.PruneEvery, "err", err)
				} else if events+attempts > 0 {
					r.log.Info("webhooks: pruned", "events", events, "attempts", attempts, "older_than", r.prune.Keep)
				}
			}
			n, err := r.d.Pass(ctx)
			wait := r.interval
			switch {
			case err != nil && ctx.Err() == nil:
				// MySQL or Redis down: said once a backoff, not every interval.
				r.log.Warn("webhooks: dispatch failed; trying again", "in", backoff, "err", err)
				wait, backoff = backoff, min(2*backoff, 5*time.Second)
			case err == nil:
				backoff = r.interval
				if n == r.d.Batch {
					continue
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	})
}

// repairs is one leadership's watch over the Redis it queues into. A
// repair runs beside the passes (it waits for the delivery log to settle,
// and lists every task): what a pass queues meanwhile is not its concern.
type repairs struct {
	r *WebhookDispatcher
	// last is the identity last read; due, when set, the start of a
	// window to repair (a change seen, the leadership begun, or a repair
	// that failed).
	last    string
	due     time.Time
	readAt  time.Time
	running chan struct{} // closed when the repair running ends; nil when none runs
	failed  time.Time     // the window of a repair that failed, to try again
	mu      sync.Mutex
}

// repairs begins a leadership's watch: whatever the last leader queued
// in the window before now may have been lost with no leader to see it.
func (r *WebhookDispatcher) repairs(ctx context.Context) *repairs {
	rp := &repairs{r: r}
	if r.repair == nil {
		return rp
	}
	rp.last, _ = r.identity(ctx)
	rp.readAt = time.Now()
	rp.due = time.Now().Add(-r.window)
	return rp
}

// check reads Redis's identity (at most every IdentityEvery) and starts a
// repair when it changed, or when one is due and none runs.
func (rp *repairs) check(ctx context.Context) {
	r := rp.r
	if r.repair == nil {
		return
	}
	if time.Since(rp.readAt) >= r.IdentityEvery {
		rp.readAt = time.Now()
		id, err := r.identity(ctx)
		if err == nil && id != rp.last {
			if rp.last != "" {
				r.log.Warn("webhooks: the Redis the deliveries are queued into is another one (restarted or failed over): "+
					"repairing the deliveries it may have lost", "run_id", id, "was", rp.last, "window", r.window)
				rp.want(time.Now().Add(-r.window))
			}
			rp.last = id
		}
	}
	if rp.running != nil {
		select {
		case <-rp.running:
			rp.running = nil
		default:
			return
		}
	}
	rp.mu.Lock()
	if !rp.failed.IsZero() {
		rp.want(rp.failed)
		rp.failed = time.Time{}
	}
	rp.mu.Unlock()
	if rp.due.IsZero() {
		return
	}
	since := rp.due
	rp.due = time.Time{}
	done := make(chan struct{})
	rp.running = done
	go func() {
		defer close(done)
		got, err := r.repair.Repair(ctx, since)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.Warn("webhooks: repair failed; trying again", "in", repairBackoff, "since", since, "err", err)
				rp.mu.Lock()
				rp.failed = since
				rp.mu.Unlock()
				select { // Redis or MySQL down: not again every pass
				case <-ctx.Done():
				case <-time.After(repairBackoff):
				}
			}
		case got.Queued > 0:
			r.log.Warn("webhooks: repaired deliveries Redis had lost", "since", got.Since, "checked", got.Checked,
				"held", got.Held, "queued_again", got.Queued)
		default:
			r.log.Info("webhooks: repair found nothing lost", "since", got.Since, "checked", got.Checked, "held", got.Held)
		}
	}()
}

// repairBackoff is the wait before a failed repair is tried again.
const repairBackoff = 5 * time.Second

// want makes a repair from since due, or from earlier if one is due already.
func (rp *repairs) want(since time.Time) {
	if rp.due.IsZero() || since.Before(rp.due) {
		rp.due = since
	}
}

// RedisIdentity returns a reader of the run id of the Redis that holds
// asynq's queue (on a cluster, the master of the queue's slot): another id
// than before means another server, or the same restarted, and either may
// lack the last writes the old one was given.
func RedisIdentity(rdb redis.UniversalClient, queue string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		var info string
		var err error
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			var node *redis.Client
			if node, err = cc.MasterForKey(ctx, "asynq:{"+queue+"}:pending"); err == nil {
				info, err = node.Info(ctx, "server").Result()
			}
		} else {
			info, err = rdb.Info(ctx, "server").Result()
		}
		if err != nil {
			return "", err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
				return v, nil
			}
		}
		return "", errors.New("INFO server has no run_id")
	}
}

// WebhookMetrics are the delivery counters and latency, and the gauges the
// worker reads from MySQL when scraped.
type WebhookMetrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

// NewWebhookMetrics registers the webhooks' metrics with reg: the
// deliveries by outcome and a sent attempt's latency, and, read at each
// scrape, the events waiting for the dispatcher, how long the oldest has
// waited, and the endpoints the worker disabled (a failed read keeps the
// last value).
func NewWebhookMetrics(reg prometheus.Registerer, undispatched func(context.Context) (int64, error),
	oldest func(context.Context) (time.Duration, error), disabled func(context.Context) (int64, error)) *WebhookMetrics {
	m := &WebhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_webhook_deliveries_total",
			Help: "Delivery attempts of webhooks by outcome: delivered (a 2xx), failed (retried, or the last), busy (sent back unsent: the endpoint was at WEBHOOK_ENDPOINT_CONCURRENCY), dropped (the endpoint is gone or disabled).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flashsale_webhook_delivery_seconds",
			Help:    "How long a sent webhook attempt took to be answered (or to fail).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, o := range []string{webhook.OutcomeDelivered, webhook.OutcomeFailed, webhook.OutcomeBusy, webhook.OutcomeDropped} {
		m.deliveries.WithLabelValues(o)
	}
	reg.MustRegister(m.deliveries, m.latency,
		lastGood("flashsale_webhook_events_undispatched",
			"Order events in the webhooks' outbox not yet turned into deliveries (the dispatcher is behind, or down).", undispatched),
		lastGood("flashsale_webhook_events_oldest_undispatched_seconds",
			"How long the oldest order event not yet turned into deliveries has waited; 0 when none waits.",
			func(ctx context.Context) (int64, error) { d, err := oldest(ctx); return int64(d.Seconds()), err }),
		lastGood("flashsale_webhook_endpoints_auto_disabled",
			"Webhook endpoints the worker disabled because a whole retry schedule failed with no 2xx meanwhile; enabling them again clears it.", disabled))
	return m
}

// Observe counts an outcome and a sent attempt's latency
// (webhook.DelivererConfig.Observe).
func (m *WebhookMetrics) Observe(outcome string, latency time.Duration) {
	m.deliveries.WithLabelValues(outcome).Inc()
	if outcome == webhook.OutcomeDelivered || (outcome == webhook.OutcomeFailed && latency > 0) {
		m.latency.Observe(latency.Seconds())
	}
}

// lastGood is a gauge read by read at each scrape, keeping the last value
// read when a read fails.
func lastGood(name, help string, read func(context.Context) (int64, error)) prometheus.GaugeFunc {
	var mu sync.Mutex
	var last float64
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // MySQL down: a scrape still answers
		defer cancel()
		n, err := read(ctx)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			last = float64(n)
		}
		return last
	})
}
