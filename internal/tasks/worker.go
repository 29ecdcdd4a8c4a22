package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/tracing"
)

// Recorder writes orders and groups into MySQL (mysqlstore.Orders).
type Recorder interface {
	Write(ctx context.Context, o order.Order) error
	// WriteMany writes many orders, in as few statements as it can.
	WriteMany(ctx context.Context, os []order.Order) error
	WriteGroup(ctx context.Context, g order.Group) error
}

// LiveOrders is what the worker and the reconciler read and mark of the
// orders Redis holds, besides the Service's own work (redisstore.Orders).
type LiveOrders interface {
	Get(ctx context.Context, no string) (order.Order, error)
	// GetMany reads orders in one round trip, with a WAIT for the replicas
	// (REDIS_ACK_REPLICAS) in the same pipeline: what goes to MySQL is
	// what a failover keeps. Those whose record is gone are named in
	// missing.
	GetMany(ctx context.Context, nos []string) (found []order.Order, missing []string, err error)
	GetGroup(ctx context.Context, gid string) (order.Group, error)
	// GetGroupReplicated is GetGroup read with a WAIT for the replicas
	// (REDIS_ACK_REPLICAS) in the same pipeline.
	GetGroupReplicated(ctx context.Context, gid string) (order.Group, error)
	// MarkPersisted notes that o, as read, is in MySQL, and takes it off its
	// outbox unless it changed since.
	MarkPersisted(ctx context.Context, o order.Order) error
	MarkPersistedMany(ctx context.Context, os []order.Order) error
	// Unpersisted lists up to max of an activity's outbox entries older than grace.
	Unpersisted(ctx context.Context, activityID int64, grace time.Duration, max int64) ([]order.OutboxEntry, error)
	// CountUnpersisted counts them all.
	CountUnpersisted(ctx context.Context, activityID int64, grace time.Duration) (int64, error)
	// DropOutboxEntry deletes an entry whose order record is gone.
	DropOutboxEntry(ctx context.Context, activityID int64, id string) error
	// Overdue lists up to limit of an activity's groups unsettled for longer
	// than olderThan after their deadline; Forget drops one whose records
	// are gone.
	Overdue(ctx context.Context, activityID int64, olderThan time.Duration, limit int64) ([]string, error)
	Forget(ctx context.Context, gid string) error
}

// DurableService is the order Service the worker runs expiries and
// settlements with: the follow-ups they queue (an order's sync, a group's)
// go to a Durable. A handler is done, and its task deleted, once it
// returns, so a follow-up only remembered in memory (the api's Relay)
// would die with the process. NewDurableService is the only way to make
// one: a Service on the relay handed to NewWorker does not compile.
type DurableService struct{ svc *order.Service }

// Orders is the Service itself, for what needs the order domain beside
// the handlers (the payment service confirms payments through it).
func (d DurableService) Orders() *order.Service { return d.svc }

// NewDurableService returns the order Service of d and cfg queueing its
// tasks on q. d.Tasks is not used (leave it nil): q takes its place.
func NewDurableService(d order.Deps, cfg order.Config, q Durable) DurableService {
	d.Tasks = q
	return DurableService{svc: order.NewService(d, cfg)}
}

// Worker runs the order tasks.
type Worker struct {
	svc      *order.Service // its Tasks are a Durable (DurableService)
	store    LiveOrders
	rec      Recorder
	tasks    Durable
	log      *slog.Logger
	payments Payments             // nil: orders' money is not the worker's to settle
	lag      prometheus.Histogram // nil: not measured (WithMetrics)
	tracer   trace.Tracer         // a no-op one unless WithTracer
}

// Payments is what the worker's syncs ask of the payments
// (*payment.Service).
type Payments interface {
	// Settle does again, once, what an order's end means for its money:
	// the payment that paid it recorded, a refunded order's money given
	// back, late money given back.
	Settle(ctx context.Context, o order.Order) error
}

// WithPayments has the syncs of orders that reached their end settle their
// money (Payments.Settle): the durable backstop of what the api did at the
// change — record the payment, queue a refund — should its process have
// died before (the change is on the outbox until its sync ran).
func (w *Worker) WithPayments(p Payments) *Worker {
	w.payments = p
	return w
}

// settleMoney settles the money of orders that reached their end.
func (w *Worker) settleMoney(ctx context.Context, orders []order.Order) error {
	if w.payments == nil {
		return nil
	}
	var errs []error
	for _, o := range orders {
		if o.Status != order.PendingPayment {
			errs = append(errs, w.payments.Settle(ctx, o))
		}
	}
	return errors.Join(errs...)
}

// NewWorker returns the task handlers. Expiries and settlements run on svc;
// the handlers' own follow-ups go to tasks. Both queue durably (Durable);
// tasks is normally svc's queue. A zero svc serves only the handlers that
// need none (the syncs).
func NewWorker(svc DurableService, store LiveOrders, rec Recorder, tasks Durable, log *slog.Logger) *Worker {
	return &Worker{svc: svc.svc, store: store, rec: rec, tasks: tasks, log: log, tracer: noop.NewTracerProvider().Tracer("")}
}

// Register adds the handlers to mux.
func (w *Worker) Register(mux *asynq.ServeMux) {
	mux.HandleFunc(TypeSync, w.HandleSync)
	mux.HandleFunc(TypeExpire, w.HandleExpire)
	mux.HandleFunc(TypeSettle, w.HandleSettle)
	mux.HandleFunc(TypeSyncGroup, w.HandleSyncGroup)
	mux.HandleFunc(TypeSyncBatch, w.HandleSyncBatch)
	mux.HandleFunc(TypeExpireBatch, w.HandleExpireBatch)
}

// batchOrders reads a batch task's orders: their numbers, and the items
// as sent (with each order's trace context).
func batchOrders(t *asynq.Task) ([]string, []syncPayload, error) {
	p, err := parseBatchPayload(t.Payload())
	if err != nil || len(p.Orders) == 0 {
		return nil, nil, fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	nos := make([]string, len(p.Orders))
	for i, o := range p.Orders {
		if _, err := order.ParseNo(o.No); err != nil {
			return nil, nil, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
		}
		nos[i] = o.No
	}
	return nos, p.Orders, nil
}

// HandleSyncBatch is HandleSync for many orders: one pipelined read, one
// multi-row write, one pipelined mark. A record gone from Redis is logged
// and skipped (nothing left to write); the others are written.
func (w *Worker) HandleSyncBatch(ctx context.Context, t *asynq.Task) error {
	nos, items, err := batchOrders(t)
	if err != nil {
		return err
	}
	ctx, span := w.tracer.Start(ctx, "order.sync-batch", trace.WithLinks(orderLinks(items)...),
		trace.WithAttributes(attribute.Int("flashsale.orders", len(nos))))
	defer span.End()
	orders, missing, err := w.store.GetMany(ctx, nos)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err
	}
	for _, no := range missing {
		w.log.Error("order record gone before it reached MySQL", "order", no)
	}
	if len(orders) == 0 {
		return nil
	}
	if err := w.write(ctx, orders); err != nil {
		span.SetStatus(codes.Error, err.Error())
		return err // MySQL down, say: retried with backoff; the writes are idempotent
	}
	if err := w.settleMoney(ctx, orders); err != nil {
		return err // retried: the order stays on the outbox until its money is settled
	}
	if err := w.store.MarkPersistedMany(ctx, orders); err != nil {
		return err
	}
	w.observeLag(orders...)
	return nil
}

// WithTracer has the syncs traced: a span per task (order.sync-batch,
// order.sync), linked to each order's request span (the traceparent its
// task carries), with the MySQL write as a child (mysql.write-orders).
func (w *Worker) WithTracer(t trace.Tracer) *Worker {
	w.tracer = t
	return w
}

// write records orders in MySQL under a span of their own
// (mysql.write-orders, the sync's child).
func (w *Worker) write(ctx context.Context, orders []order.Order) error {
	ctx, span := w.tracer.Start(ctx, "mysql.write-orders", trace.WithAttributes(attribute.Int("flashsale.orders", len(orders))))
	defer span.End()
	err := w.rec.WriteMany(ctx, orders)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// orderLinks are links to the requests of a sync task's orders (none with
// tracing off: no item carries a trace context then).
func orderLinks(items []syncPayload) []trace.Link {
	var links []trace.Link
	for _, o := range items {
		if l, ok := tracing.Link(o.Trace); ok {
			l.Attributes = []attribute.KeyValue{attribute.String("flashsale.order", o.No)}
			links = append(links, l)
		}
	}
	return links
}

// WithMetrics registers the worker's metrics with reg:
// flashsale_persistence_lag_seconds, how long after its latest change (the
// order's Redis times: created, paid, cancelled; Redis's clock against the
// worker's) an order's state was written to MySQL by a sync task.
func (w *Worker) WithMetrics(reg prometheus.Registerer) *Worker {
	w.lag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "flashsale_persistence_lag_seconds",
		Help:    "From an order's latest change in Redis (accepted, paid, cancelled) to its state written to MySQL by the worker's sync.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	reg.MustRegister(w.lag)
	return w
}

func (w *Worker) observeLag(orders ...order.Order) {
	if w.lag == nil {
		return
	}
	now := time.Now()
	for _, o := range orders {
		at := o.CreatedAt
		for _, t := range []time.Time{o.PaidAt, o.CancelledAt} {
			if t.After(at) {
				at = t
			}
		}
		w.lag.Observe(max(now.Sub(at), 0).Seconds())
	}
}

// HandleExpireBatch is HandleExpire for many orders, a few at a time. When
// some fail and some do not, the failed ones are queued again each on its
// own (ExpireAt, now) and the batch is done: a retry of the whole batch
// would redo every settled order with each retry of one that keeps failing.
// When all fail (Redis down, say), the batch itself is retried.
func (w *Worker) HandleExpireBatch(ctx context.Context, t *asynq.Task) error {
	nos, _, err := batchOrders(t)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var failed []string
	var errs []error
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, no := range nos {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := w.svc.Expire(ctx, no)
			if err != nil && !errors.Is(err, order.ErrNotFound) {
				mu.Lock()
				failed, errs = append(failed, no), append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) == 0 || len(failed) == len(nos) {
		return errors.Join(errs...) // ErrNotDue (early) and outages are retried
	}
	for _, no := range failed {
		if err := w.tasks.ExpireAt(ctx, no, time.Now()); err != nil {
			return err // the whole batch again; expiring is idempotent
		}
	}
	w.log.Warn("expiry batch: orders queued again on their own", "failed", len(failed), "of", len(nos), "first_error", errs[0])
	return nil
}

func payload(t *asynq.Task) (syncPayload, error) {
	var p syncPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.No == "" {
		return p, fmt.Errorf("bad payload %q: %v: %w", t.Payload(), err, asynq.SkipRetry)
	}
	if _, err := order.ParseNo(p.No); err != nil {
		return p, fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	return p, nil
}

// HandleSync records the order's current state (read from Redis now, so a
// late or repeated task writes the latest) and takes it off the outbox.
func (w *Worker) HandleSync(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	ctx, span := w.tracer.Start(ctx, "order.sync", trace.WithLinks(orderLinks([]syncPayload{p})...),
		trace.WithAttributes(attribute.String("flashsale.order", p.No)))
	defer span.End()
	found, _, err := w.store.GetMany(ctx, []string{p.No}) // read with the replicas' WAIT
	if err != nil {
		return err
	}
	if len(found) == 0 {
		// The record expired before it was written: nothing left to write.
		w.log.Error("order record gone before it reached MySQL", "order", p.No)
		return fmt.Errorf("order %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	o := found[0]
	if err := w.write(ctx, found[:1]); err != nil {
		return err // MySQL down, say: retried with backoff
	}
	if err := w.settleMoney(ctx, found); err != nil {
		return err
	}
	if err := w.store.MarkPersisted(ctx, o); err != nil {
		return err
	}
	w.observeLag(o)
	return nil
}

// HandleExpire cancels the order if it is still unpaid at its deadline.
func (w *Worker) HandleExpire(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	_, err = w.svc.Expire(ctx, p.No)
	if errors.Is(err, order.ErrNotFound) {
		return fmt.Errorf("order %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	return err // ErrNotDue (the task ran early) and outages are retried
}

// HandleSettle settles the group at its deadline (see Service.Settle).
func (w *Worker) HandleSettle(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	err = w.svc.Settle(ctx, p.No)
	if errors.Is(err, order.ErrGroupNotFound) {
		return fmt.Errorf("group %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	return err // ErrNotDue (early) and outages are retried
}

// HandleSyncGroup records the group's current state.
func (w *Worker) HandleSyncGroup(ctx context.Context, t *asynq.Task) error {
	p, err := payload(t)
	if err != nil {
		return err
	}
	g, err := w.store.GetGroupReplicated(ctx, p.No)
	if errors.Is(err, order.ErrGroupNotFound) {
		return fmt.Errorf("group %s gone from Redis: %w", p.No, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	return w.rec.WriteGroup(ctx, g)
}
