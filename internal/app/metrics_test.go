package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The queries of the dashboard and of the alerting rules, from the files
// operators load (deploy/grafana, deploy/prometheus).
func deployedQueries(t *testing.T) (dashboard, rules []string) {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/grafana/flashsale.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard: %v", err)
	}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			dashboard = append(dashboard, q.Expr)
		}
	}
	raw, err = os.ReadFile("../../deploy/prometheus/flashsale.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &r); err != nil {
		t.Fatalf("the rules: %v", err)
	}
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			rules = append(rules, rule.Expr)
		}
	}
	if len(dashboard) < 10 || len(rules) < 10 {
		t.Fatalf("%d dashboard queries, %d rules: the files were not read", len(dashboard), len(rules))
	}
	return dashboard, rules
}

// metricRef finds the metric names in a PromQL query: ours, Go's and the
// process's, and up.
var metricRef = regexp.MustCompile(`\b(flashsale_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+|up)\b`)

// Every metric a dashboard panel or an alert reads is one the api or the
// worker exports (registered, whether or not it has a value yet: a lock
// lost is an event most runs never see), so no panel is blank and no alert
// is silent for a name that does not exist. A histogram's series are its
// name's _bucket, _sum and _count.
func TestMetrics_dashboardAndAlertsReadOnlyExportedMetrics(t *testing.T) {
	s := newStack(t, "")
	w := s.worker()
	exported := map[string]bool{"up": true} // Prometheus's own, per target
	for _, n := range append(s.api.MetricNames(), w.MetricNames()...) {
		exported[n] = true
	}
	for _, want := range []string{"flashsale_http_requests_total", "flashsale_outbox_oldest_seconds", "flashsale_dependency_up",
		"flashsale_redis_acks_total", "flashsale_persistence_lag_seconds", "flashsale_queue_tasks", "flashsale_lock_lost_total"} {
		if !exported[want] {
			t.Errorf("%s is not exported (MetricNames lists %d names)", want, len(exported))
		}
	}
	dashboard, rules := deployedQueries(t)
	for what, queries := range map[string][]string{"dashboard": dashboard, "rules": rules} {
		for _, q := range queries {
			refs := metricRef.FindAllString(q, -1)
			if len(refs) == 0 {
				t.Errorf("%s: %q reads no metric", what, q)
			}
			for _, name := range refs {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] {
					t.Errorf("%s: %q reads %s, which nothing exports", what, q, name)
				}
			}
		}
	}
}

// scrape returns a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(body)
}

// sample is the value of the series named exactly so (name and labels as
// Prometheus's text format writes them) on page, or -1.
func sample(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

// What the api and the worker export after a few orders: the requests by
// route, status and code (a 202, a sold-out 409 from the gate's canned
// answer, an unmatched 404), Redis and MySQL reachable, the sale's outbox,
// the worker's queue and the orders' persistence lag.
func TestMetrics_afterOrders_requestsOutboxQueueAndLagExported(t *testing.T) {
	s := newStack(t, "")
	w := s.worker()
	act := s.sale(2, 1, 60)
	for user := int64(1); user <= 2; user++ {
		if r := s.order(user, act, 1); r.code != 202 {
			t.Fatalf("order: %d %v", r.code, r.body)
		}
	}
	s.waitPersisted(act, 2, 10*time.Second)
	for range 3 { // the third and later: the sold-out gate
		if r := s.order(3, act, 1); r.code != 409 {
			t.Fatalf("sold out: %d %v", r.code, r.body)
		}
	}
	if resp, err := http.Get(s.base + "/v1/nothing-here"); err == nil { // not through the contract check: no such operation
		resp.Body.Close()
	}

	api := scrape(t, s.base+"/metrics")
	orders := `route="/v1/activities/:id/orders"`
	for series, want := range map[string]float64{
		`flashsale_http_requests_total{code="",method="POST",` + orders + `,status="202"}`:            2,
		`flashsale_http_requests_total{code="SOLD_OUT",method="POST",` + orders + `,status="409"}`:    3,
		`flashsale_http_requests_total{code="NOT_FOUND",method="GET",route="unmatched",status="404"}`: 1,
		`flashsale_http_request_duration_seconds_count{method="POST",` + orders + `}`:                 5,
		`flashsale_dependency_up{dependency="redis"}`:                                                 1,
		`flashsale_dependency_up{dependency="mysql"}`:                                                 1,
		fmt.Sprintf(`flashsale_outbox_orders{activity="%d"}`, act):                                    0,
		fmt.Sprintf(`flashsale_outbox_oldest_seconds{activity="%d"}`, act):                            0,
		`flashsale_redis_acks_total{result="short"}`:                                                  0,
	} {
		if got := sample(api, series); got != want {
			t.Errorf("api: %s = %v, want %v", series, got, want)
		}
	}
	worker := scrape(t, "http://"+w.Addr+"/metrics")
	if got := sample(worker, "flashsale_persistence_lag_seconds_count"); got < 2 {
		t.Errorf("worker: flashsale_persistence_lag_seconds_count = %v, want 2+ (the orders written)", got)
	}
	if got := sample(worker, `flashsale_queue_tasks{state="scheduled"}`); got < 1 {
		t.Errorf("worker: scheduled tasks %v, want the orders' payment timeouts", got)
	}
	if got := sample(worker, `flashsale_queue_latency_seconds`); got < 0 || got > 5 {
		t.Errorf("worker: queue latency %v, want a small figure", got)
	}
}

// A real Prometheus (Debian's prometheus, which make test installs) scrapes
// a real api and a real worker process under orders, evaluates the
// deployed alerting rules, and fires FlashsaleWorkerDown and then
// FlashsaleOrdersNotReachingMySQL when the worker is stopped while orders
// keep coming, and not before. The rules' expressions are the deployed
// ones; only their for: durations are cut to 5 s, so the test does not wait
// minutes.
func TestPrometheus_workerStoppedUnderOrders_alertsFire(t *testing.T) {
	waits(t)
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (make test installs Debian's prometheus): %v", err)
	}
	s := newStack(t, "")
	workerAddr := testenv.FreeAddr(t)
	worker := testenv.StartChild(t, "TestPrometheus_workerStoppedUnderOrders_alertsFire", "worker",
		s.childEnv(map[string]string{"WORKER_HTTP_ADDR": workerAddr})...)
	worker.WaitHTTP(t, "http://"+workerAddr+"/readyz", 60*time.Second)

	dir := t.TempDir()
	rules, err := os.ReadFile("../../deploy/prometheus/flashsale.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(rules, []byte("$1 5s"))
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), short, 0o644); err != nil {
		t.Fatal(err)
	}
	apiAddr := strings.TrimPrefix(s.base, "http://")
	conf := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [rules.yml]
scrape_configs:
  - job_name: flashsale-api
    static_configs: [{targets: [%q]}]
  - job_name: flashsale-worker
    static_configs: [{targets: [%q]}]
`, apiAddr, workerAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := testenv.FreeAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", out)
		}
	})

	// firing lists the alerts in state firing, by name.
	firing := func() []string {
		resp, err := http.Get("http://" + promAddr + "/api/v1/alerts")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var a struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&a)
		var names []string
		for _, al := range a.Data.Alerts {
			if al.State == "firing" {
				names = append(names, al.Labels["alertname"])
			}
		}
		return names
	}
	// up is the number of targets Prometheus scrapes successfully.
	up := func() int {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=sum(up)")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var q struct {
			Data struct {
				Result []struct {
					Value []any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&q)
		if len(q.Data.Result) == 0 {
			return 0
		}
		var n int
		fmt.Sscan(fmt.Sprint(q.Data.Result[0].Value[1]), &n)
		return n
	}

	act := s.sale(100_000, 1, 60)
	user := int64(0)
	place := func(n int) {
		for range n {
			user++
			if r := s.order(user, act, 1); r.code != 202 {
				t.Fatalf("order: %d %v", r.code, r.body)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for up() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never scraped both targets")
		}
		place(5)
		time.Sleep(500 * time.Millisecond)
	}
	// Healthy, under orders, for a while: no alert fires.
	for range 8 {
		place(10)
		time.Sleep(time.Second)
	}
	if f := firing(); len(f) != 0 {
		t.Fatalf("alerts firing on a healthy stack: %v", f)
	}

	if err := worker.Terminate(10 * time.Second); err != nil { // stopped as an operator (or Kubernetes) stops it
		t.Logf("worker stop: %v", err)
	}
	stopped := time.Now()
	want := []string{"FlashsaleWorkerDown", "FlashsaleOrdersNotReachingMySQL"}
	var f []string
	for time.Since(stopped) < 2*time.Minute {
		place(5)
		time.Sleep(time.Second)
		f = firing()
		if slices.Contains(f, want[0]) && slices.Contains(f, want[1]) {
			break
		}
	}
	for _, name := range want {
		if !slices.Contains(f, name) {
			t.Fatalf("%v after the worker stopped: firing %v, want %v", time.Since(stopped).Round(time.Second), f, want)
		}
	}
	t.Logf("firing %v, %v after the worker stopped", f, time.Since(stopped).Round(time.Second))
}
