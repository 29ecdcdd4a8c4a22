package lock

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lock library's Prometheus collectors. Every series is
// labelled by kind (mutex, reentrant, fair, redlock, mysql) and by family, a
// name the caller gives with WithFamily ("default" otherwise). Never by key:
// keys are unbounded (one per user, per order), families are not.
type Metrics struct {
	wait      *prometheus.HistogramVec
	hold      *prometheus.HistogramVec
	contended *prometheus.CounterVec
	renewals  *prometheus.CounterVec
	renewFail *prometheus.CounterVec
	lost      *prometheus.CounterVec
	handoffs  *prometheus.CounterVec
	elided    *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, e.g. for a test that reads them directly).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"kind", "family"}
	buckets := []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5, 30}
	m := &Metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_lock_wait_seconds",
			Help:    "Time from asking for a lock to getting it or giving up, by outcome (obtained, not_obtained, canceled, error).",
			Buckets: buckets,
		}, append(labels, "outcome")),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashsale_lock_hold_seconds",
			Help:    "Time a lock was held, from obtaining it to releasing or losing it.",
			Buckets: buckets,
		}, labels),
		contended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_contended_total",
			Help: "Obtain attempts that found the lock held by someone else.",
		}, labels),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_renewals_total",
			Help: "Watchdog renewals that extended a lock.",
		}, labels),
		renewFail: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_renewal_failures_total",
			Help: "Watchdog renewals that failed: the store was unreachable, or the lock was gone.",
		}, labels),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_lost_total",
			Help: "Locks lost while held (expired unrenewed, taken, deleted).",
		}, labels),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_local_handoffs_total",
			Help: "Mutex holds passed straight to the next waiter in the process, without a Redis round trip.",
		}, labels),
		elided: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_lock_elided_total",
			Help: "Steps run under a free mutex in one script without taking it (Client.Elide); the steps that found it held count as contended.",
		}, labels),
	}
	if reg != nil {
		reg.MustRegister(m.wait, m.hold, m.contended, m.renewals, m.renewFail, m.lost, m.handoffs, m.elided)
	}
	return m
}

// observer reports one lock's events; the zero value (no Metrics) reports
// nothing.
type observer struct {
	m            *Metrics
	kind, family string
}

// timeObtain records how an obtain went in the wait histogram; use as
//
//	defer c.cfg.timeObtain("mutex", opts, time.Now(), &l, &err)
func (c Config) timeObtain(kind string, opts []Option, start time.Time, l **Lock, err *error) {
	if c.Metrics != nil {
		c.observer(kind, buildOptionsLoose(opts)).waited(start, *l, *err)
	}
}

func (c Config) observer(kind string, o options) observer {
	family := o.family
	if family == "" {
		family = "default"
	}
	return observer{m: c.Metrics, kind: kind, family: family}
}

func (ob observer) waited(start time.Time, l *Lock, err error) {
	if ob.m == nil {
		return
	}
	outcome := "obtained"
	switch {
	case l != nil:
	case err == nil || isErr(err, ErrNotObtained):
		outcome = "not_obtained"
	case isErr(err, ErrCanceled):
		outcome = "canceled"
	default:
		outcome = "error"
	}
	ob.m.wait.WithLabelValues(ob.kind, ob.family, outcome).Observe(time.Since(start).Seconds())
}

func (ob observer) held(since time.Time) {
	if ob.m != nil {
		ob.m.hold.WithLabelValues(ob.kind, ob.family).Observe(time.Since(since).Seconds())
	}
}

func (ob observer) inc(v *prometheus.CounterVec) {
	if ob.m != nil {
		v.WithLabelValues(ob.kind, ob.family).Inc()
	}
}

func (ob observer) contended() {
	if ob.m != nil {
		ob.inc(ob.m.contended)
	}
}

func (ob observer) elided() {
	if ob.m != nil {
		ob.inc(ob.m.elided)
	}
}

func (ob observer) renewed(ok bool) {
	if ob.m == nil {
		return
	}
	if ok {
		ob.inc(ob.m.renewals)
	} else {
		ob.inc(ob.m.renewFail)
	}
}

func (ob observer) lostOne() {
	if ob.m != nil {
		ob.inc(ob.m.lost)
	}
}

func (ob observer) handedOff() {
	if ob.m != nil {
		ob.inc(ob.m.handoffs)
	}
}
