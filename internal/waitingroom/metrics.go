package waitingroom

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// Metrics are the waiting room's Prometheus counters of one api process.
type Metrics struct {
	joins    prometheus.Counter
	admitted prometheus.Counter
}

// NewMetrics registers the waiting room's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		joins: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashsale_waitingroom_joins_total",
			Help: "Joins of a waiting room answered (a shopper joining again counts again)."}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "flashsale_waitingroom_admitted_total",
			Help: "Shoppers seen admitted for the first time (by this process's reads)."}),
	}
	reg.MustRegister(m.joins, m.admitted)
	return m
}

var queueLengthDesc = prometheus.NewDesc("flashsale_waitingroom_queue_length",
	"Shoppers in a live sale's waiting room not yet admitted (places given less the serving counter), read from Redis at the scrape.",
	[]string{"activity"}, nil)

var servingDesc = prometheus.NewDesc("flashsale_waitingroom_serving",
	"A live sale's waiting room's serving counter: the places admitted so far, read from Redis at the scrape (the alert WaitingRoomStalled watches it stand).",
	[]string{"activity"}, nil)

// QueueCollector exports each live sale's queue length and serving counter at the scrape: one
// HMGET of its meta per live sale (a sale without a room exports none).
type QueueCollector struct {
	Live func(context.Context) ([]int64, error) // the live sales' ids
	Rdb  redis.UniversalClient
}

// Describe implements prometheus.Collector.
func (c QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueLengthDesc
	ch <- servingDesc
}

// Collect implements prometheus.Collector.
func (c QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ids, err := c.Live(ctx)
	if err != nil {
		return
	}
	for _, id := range ids {
		v, err := c.Rdb.HMGet(ctx, rediskeys.For(id).Meta, "wr", "wr_joined", "wr_srv").Result()
		if err != nil {
			return
		}
		if wr, _ := v[0].(string); wr != "1" {
			continue
		}
		joined, _ := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
		srv, _ := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
		ch <- prometheus.MustNewConstMetric(queueLengthDesc, prometheus.GaugeValue,
			float64(max(joined-srv/1000, 0)), strconv.FormatInt(id, 10))
		ch <- prometheus.MustNewConstMetric(servingDesc, prometheus.GaugeValue, float64(srv/1000), strconv.FormatInt(id, 10))
	}
}
