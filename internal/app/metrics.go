package app

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/internal/activity"
)

var (
	outboxOrdersDesc = prometheus.NewDesc("flashsale_outbox_orders",
		"Orders of a live activity whose latest state (accepted, paid, cancelled…) is in Redis and not yet in MySQL: its outbox, read at the scrape.",
		[]string{"activity"}, nil)
	outboxOldestDesc = prometheus.NewDesc("flashsale_outbox_oldest_seconds",
		"How long the oldest entry of a live activity's outbox has waited for MySQL (0 when it is empty). Normally well under a second; growing while the workers are down or MySQL is.",
		[]string{"activity"}, nil)
)

// outboxCollector exports the live activities' outboxes, read at each
// scrape by the api (the worker may be the thing that is down): the live
// activities from MySQL, then each one's live figures (stock.Keeper.Read,
// what the admin's live page reads: the outbox's size and its oldest
// entry). A scrape that cannot read them in a second exports none
// (flashsale_dependency_up says why).
type outboxCollector struct {
	live func(context.Context) ([]int64, error)
	read func(ctx context.Context, id int64) (activity.Live, error)
}

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxOrdersDesc
	ch <- outboxOldestDesc
}

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ids, err := c.live(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	for _, id := range ids {
		v, err := c.read(ctx, id)
		if err != nil {
			return
		}
		age := 0.0
		if v.Unrecorded > 0 && !v.OldestUnrecorded.IsZero() {
			age = max(now.Sub(v.OldestUnrecorded), 0).Seconds()
		}
		a := strconv.FormatInt(id, 10)
		ch <- prometheus.MustNewConstMetric(outboxOrdersDesc, prometheus.GaugeValue, float64(v.Unrecorded), a)
		ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, age, a)
	}
}

// registry is the process's Prometheus registry, remembering the name of
// every metric registered with it (MetricNames), so a test can hold the
// dashboard's and the alerts' queries to what the service exports,
// including vectors that have seen no event yet and so are not in /metrics.
type registry struct {
	*prometheus.Registry
	mu    sync.Mutex
	names map[string]bool
}

func newRegistry() *registry {
	return &registry{Registry: prometheus.NewRegistry(), names: map[string]bool{}}
}

// fqName finds a Desc's name in its String (the type exports no getter).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	r.mu.Lock()
	defer r.mu.Unlock()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *registry) metricNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.names))
}

// MetricNames lists the metrics the api exports on /metrics (whether or
// not each has a value yet), once Run returned.
func (m *API) MetricNames() []string { return m.stack.reg.metricNames() }

// MetricNames lists the metrics the worker exports on /metrics, once Run
// returned.
func (m *Worker) MetricNames() []string { return m.stack.reg.metricNames() }
