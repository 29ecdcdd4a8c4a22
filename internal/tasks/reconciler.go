package tasks

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/order"
)

// Reconciler finds orders whose latest state never reached MySQL — the API
// died between accepting or changing (paying, say) an order and queueing its
// sync, or a task was lost — and queues them again, from the activity
// outboxes. One worker at a time runs it: the reconciler lock, renewed while
// held, elects the leader.
//
// An order still unpersisted StuckAfter its acceptance or change it writes
// itself.
// That covers a worker killed while running sync tasks: asynq gives such a
// task back only after its 30s lease and another 30s of allowance for clock
// skew, checked once a minute, and until then its TaskID refuses a new
// task. The write is the same idempotent upsert, so nothing is written twice.
type Reconciler struct {
	locks lock.Locker
	store LiveOrders
	tasks Durable
	rec   Recorder
	// StuckAfter is when the reconciler stops waiting for the queue.
	StuckAfter time.Duration
	// Live lists the activities whose outboxes to scan.
	Live func(ctx context.Context) ([]int64, error)
	// Audit, if set, compares an activity's figures in Redis and MySQL and
	// returns how many things disagree (exported as a metric).
	Audit    func(ctx context.Context, activityID int64) (problems int, err error)
	Grace    time.Duration // how old an outbox entry must be before it is queued again; default activity.PersistenceGrace
	Interval time.Duration // between passes
	// Payments, if set, settles the money of the orders the reconciler
	// writes itself, as the worker's syncs do (Worker.WithPayments).
	Payments Payments
	// Pending, if set, lists up to limit of an activity's orders that MySQL
	// records as pending payment, created before before, oldest first
	// (mysqlstore.Orders.PendingBefore): the sweep for payment timeouts
	// that were lost (expireOverdue).
	Pending func(ctx context.Context, activityID int64, before time.Time, limit int) ([]string, error)
	// Transfers, if set, finishes a sharded sale's transfers of units
	// between its shards that were taken and not given (their mover died
	// between the steps; stock.Keeper.Settle) and returns how many.
	Transfers func(ctx context.Context, activityID int64) (int, error)
	// Rules, if set, loads an activity's rules into Redis again when Redis
	// holds an older version than MySQL (an admin change recorded whose
	// load failed: admin.Service.Repair) and says whether it loaded.
	Rules func(ctx context.Context, activityID int64) (bool, error)
	// SoldOut, if set, records an activity's sell-out that no script marks
	// (a sharded sale's, proven by a snapshot: stock.Keeper.SoldOutNow) and
	// says whether it recorded one.
	SoldOut func(ctx context.Context, activityID int64) (bool, error)
	log     *slog.Logger

	unpersisted *prometheus.GaugeVec
	mismatches  *prometheus.GaugeVec
	overdue     *prometheus.GaugeVec
	unexpired   *prometheus.CounterVec
	transfers   *prometheus.CounterVec
	reloaded    *prometheus.CounterVec
}

// sweepBatch is how many of an activity's oldest pending orders each pass
// looks at for a lost payment timeout.
const sweepBatch = 200

// NewReconciler returns a reconciler; register its metrics with reg (nil: none).
func NewReconciler(locks lock.Locker, store LiveOrders, tasks Durable, rec Recorder, live func(context.Context) ([]int64, error),
	log *slog.Logger, reg prometheus.Registerer) *Reconciler {
	r := &Reconciler{
		locks: locks, store: store, tasks: tasks, rec: rec, Live: live, log: log,
		Grace: activity.PersistenceGrace, StuckAfter: 15 * time.Second, Interval: 2 * time.Second,
		unpersisted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_orders_unpersisted",
			Help: "Orders accepted or changed in Redis longer ago than the grace period whose latest state is not yet recorded in MySQL, by activity.",
		}, []string{"activity"}),
		mismatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_reconcile_mismatches",
			Help: "Things Redis and MySQL disagree on for an activity (status, total, units sold vs recorded beyond what orders on their way explain, orders waiting for MySQL longer than the grace period), by activity. Orders on their way within the grace period are not counted.",
		}, []string{"activity"}),
		overdue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_groups_overdue",
			Help: "Groups still unsettled longer than the grace period after their deadline, by activity (their settle task is queued again each pass).",
		}, []string{"activity"}),
		unexpired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_orders_timeout_requeued_total",
			Help: "Unpaid orders found still pending longer than the grace period after their payment time, whose timeout the reconciler queued again (it was lost, or the workers are that far behind), by activity.",
		}, []string{"activity"}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_stock_transfers_settled_total",
			Help: "Transfers of units between a sharded sale's shards that their mover left half done (taken, not given: it died or lost Redis between the steps) and the reconciler finished, by activity.",
		}, []string{"activity"}),
		reloaded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_activity_rules_reloaded_total",
			Help: "Admin changes recorded in MySQL whose load into Redis had failed (Redis held an older version of the rules: a close that did not stop sales, say) and that the reconciler loaded, by activity.",
		}, []string{"activity"}),
	}
	if reg != nil {
		reg.MustRegister(r.unpersisted, r.mismatches, r.overdue, r.unexpired, r.transfers, r.reloaded)
	}
	return r
}

// Run leads when it can, until ctx ends: a pass every Interval while this
// worker holds the leader lock (lead).
func (r *Reconciler) Run(ctx context.Context) {
	lead(ctx, r.locks, "worker:reconciler", "reconciler", r.log, func(ctx context.Context) {
		t := time.NewTicker(r.Interval)
		defer t.Stop()
		for {
			if err := r.Pass(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("reconciler pass failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Pass scans every live activity's outbox and unsettled groups once and
// queues again what has waited longer than the grace period.
func (r *Reconciler) Pass(ctx context.Context) error {
	ids, err := r.Live(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			return errors.Join(append(errs, ctx.Err())...)
		}
		entries, err := r.store.Unpersisted(ctx, id, r.Grace, 1000)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Counted whole: the 1,000 listed were all the gauge said before.
		if n, err := r.store.CountUnpersisted(ctx, id, r.Grace); err != nil {
			errs = append(errs, err)
		} else {
			r.unpersisted.WithLabelValues(strconv.FormatInt(id, 10)).Set(float64(n))
		}
		if r.Rules != nil {
			// Before the audit, which would otherwise report what this
			// repairs.
			loaded, err := r.Rules(ctx, id)
			if err != nil {
				errs = append(errs, err)
			}
			if loaded {
				r.reloaded.WithLabelValues(strconv.FormatInt(id, 10)).Inc()
				r.log.Warn("loaded an activity's rules into Redis: an admin change had been recorded in MySQL but not loaded", "activity", id)
			}
		}
		if r.Audit != nil {
			if n, err := r.Audit(ctx, id); err != nil {
				errs = append(errs, err)
			} else {
				r.mismatches.WithLabelValues(strconv.FormatInt(id, 10)).Set(float64(n))
			}
		}
		if err := r.settleOverdue(ctx, id); err != nil {
			errs = append(errs, err)
		}
		if r.Transfers != nil {
			n, err := r.Transfers(ctx, id)
			if err != nil {
				errs = append(errs, err)
			}
			if n > 0 {
				r.transfers.WithLabelValues(strconv.FormatInt(id, 10)).Add(float64(n))
				r.log.Warn("finished transfers of units between shards that their mover left half done", "activity", id, "transfers", n)
			}
		}
		if r.SoldOut != nil {
			recorded, err := r.SoldOut(ctx, id)
			if err != nil {
				errs = append(errs, err)
			}
			if recorded {
				r.log.Info("a sharded sale sold out: activity.sold_out recorded", "activity", id)
			}
		}
		if err := r.expireOverdue(ctx, id); err != nil {
			errs = append(errs, err)
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return errors.Join(append(errs, ctx.Err())...)
			}
			o, err := r.store.Get(ctx, e.No)
			if errors.Is(err, order.ErrNotFound) {
				// Outlived its record: nothing left to write, and kept it would
				// fail every pass.
				r.log.Error("order record gone before its latest state reached MySQL", "order", e.No)
				errs = append(errs, r.store.DropOutboxEntry(ctx, id, e.ID))
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if o.Status == order.PendingPayment {
				if err := r.tasks.ExpireAt(ctx, e.No, o.PayBy); err != nil {
					// Nothing else for this order this pass: syncing it, or
					// writing it and marking it persisted, would take it off
					// the outbox with no timeout queued anywhere, and the
					// unpaid order would hold its units for ever.
					errs = append(errs, err)
					continue
				}
			}
			if time.Since(e.Since) < r.StuckAfter {
				if err := r.tasks.Sync(ctx, e.No, o.Fence); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			// Written by the reconciler itself: read again, with the
			// replicas' WAIT in the same pipeline (what MySQL gets is what a
			// failover keeps).
			found, _, err := r.store.GetMany(ctx, []string{e.No})
			if err != nil || len(found) == 0 {
				errs = append(errs, err)
				continue
			}
			o = found[0]
			if err := r.rec.Write(ctx, o); err != nil {
				errs = append(errs, err)
				continue
			}
			if r.Payments != nil && o.Status != order.PendingPayment {
				if err := r.Payments.Settle(ctx, o); err != nil {
					errs = append(errs, err) // kept on the outbox: the next pass settles it
					continue
				}
			}
			if err := r.store.MarkPersisted(ctx, o); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// settleOverdue queues the settlement of activity id's groups that are past
// their deadline by more than the grace period and still unsettled: their
// settle task was lost (the API died between opening the group and queueing
// it). A task still queued keeps its TaskID, so this never settles twice;
// settling is idempotent anyway.
func (r *Reconciler) settleOverdue(ctx context.Context, id int64) error {
	gids, err := r.store.Overdue(ctx, id, r.Grace, 1000)
	if err != nil {
		return err
	}
	r.overdue.WithLabelValues(strconv.FormatInt(id, 10)).Set(float64(len(gids)))
	var errs []error
	for _, gid := range gids {
		_, err := r.store.GetGroup(ctx, gid)
		switch {
		case errors.Is(err, order.ErrGroupNotFound):
			errs = append(errs, r.store.Forget(ctx, gid)) // its records outlived their retention
		case err != nil:
			errs = append(errs, err)
		default:
			errs = append(errs, r.tasks.SettleAt(ctx, gid, time.Now()))
		}
	}
	return errors.Join(errs...)
}

// expireOverdue queues again the payment timeout of activity id's orders
// that are persisted, still unpaid, and past their payment time by more
// than the grace period. The outbox cannot find them (they are off it), and
// their timeout task can be lost where nothing else is: a failover or a
// split brain that drops what the old primary alone held keeps the order
// (its writes were acknowledged by a replica, REDIS_ACK_REPLICAS) but not
// the scheduled task asynq wrote beside it, which nothing acknowledged.
// Unswept, such an order would hold its units, unsold, for ever (seen in
// the hour's network soak, 2026-11-26). The task keeps its TaskID, so one
// still queued is not queued twice; a timeout that runs late is harmless
// (Service.Expire is a no-op on a paid or cancelled order).
func (r *Reconciler) expireOverdue(ctx context.Context, id int64) error {
	if r.Pending == nil {
		return nil
	}
	now := time.Now()
	nos, err := r.Pending(ctx, id, now.Add(-r.Grace), sweepBatch)
	if err != nil || len(nos) == 0 {
		return err
	}
	found, _, err := r.store.GetMany(ctx, nos) // the missing outlived their records: nothing to cancel
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range found {
		if o.Status != order.PendingPayment || now.Before(o.PayBy.Add(r.Grace)) {
			continue // changed (its sync on the outbox) or still in its time
		}
		r.log.Warn("reconciler: unpaid order past its payment time, timeout queued again", "order", o.No, "pay_by", o.PayBy)
		if err := r.tasks.ExpireAt(ctx, o.No, now); err != nil {
			errs = append(errs, err)
			continue
		}
		r.unexpired.WithLabelValues(strconv.FormatInt(id, 10)).Inc()
	}
	return errors.Join(errs...)
}
