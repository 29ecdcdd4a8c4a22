package tasks

import (
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	queueTasksDesc = prometheus.NewDesc("flashsale_queue_tasks",
		"Tasks in the worker's asynq queue (\"orders\") by state: pending (due, waiting for a worker), active, scheduled (payment timeouts, group deadlines), retry, archived (failed for good).",
		[]string{"state"}, nil)
	queueLatencyDesc = prometheus.NewDesc("flashsale_queue_latency_seconds",
		"How long the oldest due task of the worker's queue has waited: the workers' backlog (0 when none waits).",
		nil, nil)
)

// QueueCollector exports the worker queue's figures, read from Redis at
// each scrape (asynq's Inspector, a few commands): flashsale_queue_tasks
// {state} and flashsale_queue_latency_seconds. Nothing is exported while
// Redis does not answer (flashsale_dependency_up says so).
func QueueCollector(insp *asynq.Inspector) prometheus.Collector { return queueCollector{insp} }

type queueCollector struct{ insp *asynq.Inspector }

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueTasksDesc
	ch <- queueLatencyDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	type result struct {
		info *asynq.QueueInfo
		err  error
	}
	done := make(chan result, 1)
	// The Inspector takes no context: a frozen Redis must not hold the
	// scrape past a second (go-redis's own timeouts end the call later).
	go func() { info, err := c.insp.GetQueueInfo(QueueName); done <- result{info, err} }()
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Second):
		return
	}
	if r.err != nil {
		return // a queue not created yet, or Redis away
	}
	for state, n := range map[string]int{"pending": r.info.Pending, "active": r.info.Active, "scheduled": r.info.Scheduled,
		"retry": r.info.Retry, "archived": r.info.Archived} {
		ch <- prometheus.MustNewConstMetric(queueTasksDesc, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(queueLatencyDesc, prometheus.GaugeValue, r.info.Latency.Seconds())
}
