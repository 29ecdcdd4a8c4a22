package health

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// upDesc is flashsale_dependency_up.
var upDesc = prometheus.NewDesc("flashsale_dependency_up",
	"1 if the dependency answered its readiness check (the one /readyz runs) within a second at the scrape, else 0.",
	[]string{"dependency"}, nil)

// Collector exports checks as flashsale_dependency_up{dependency}: each is
// run at every scrape, at most a second each, all at once. A Redis
// failing over, MySQL down or a network cut show as 0 while they last.
func Collector(checks map[string]Check) prometheus.Collector { return collector(checks) }

type collector map[string]Check

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- upDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for name, r := range run(ctx, c) {
		up := 0.0
		if r == "ok" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, name)
	}
}
