package deploy

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/config"
)

// The chart's default currency is the service's: an operator who sets
// neither gets one currency however the service is deployed (the chart
// said usd while the service said cny).
func TestHelm_defaultCurrency_isTheServicesDefault(t *testing.T) {
	r := render(t, "default-values.yaml") // sets no currency: values.yaml's
	cfg, err := config.FromMap(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.configMaps["shop-flashsale"].Data["PAYMENT_CURRENCY"]; got != cfg.PaymentCurrency {
		t.Errorf("the chart's default PAYMENT_CURRENCY is %q, the service's %q: make them one", got, cfg.PaymentCurrency)
	}
}

// Every value set's REDIS_URL names its hosts as the service reads them:
// one host in the URL, the others as addr parameters. go-redis reads a
// comma-separated host list as one address ("[a:6379,b]:6379"), so the
// chart refuses a comma rather than deploy apis that cannot connect.
func TestHelm_redisURL_namesEachHostApart(t *testing.T) {
	for _, values := range []string{"default-values.yaml", "cluster-values.yaml"} {
		r := render(t, values)
		url := r.secrets["shop-flashsale"].StringData["REDIS_URL"]
		var addrs []string
		switch r.configMaps["shop-flashsale"].Data["REDIS_CLUSTER"] {
		case "true":
			opt, err := redis.ParseClusterURL(url)
			if err != nil {
				t.Fatalf("%s: REDIS_URL %q: %v", values, url, err)
			}
			addrs = opt.Addrs
		default:
			opt, err := redis.ParseURL(url)
			if err != nil {
				t.Fatalf("%s: REDIS_URL %q: %v", values, url, err)
			}
			addrs = []string{opt.Addr}
		}
		for _, a := range addrs {
			if host, _, err := net.SplitHostPort(a); err != nil || strings.ContainsAny(host, ",[]") {
				t.Errorf("%s: REDIS_URL %q gives the address %q", values, url, a)
			}
		}
	}
	out, err := exec.Command(helm(t), "template", "shop", chart, "--kube-version", kubeVersion,
		"-f", filepath.Join(chart, "ci", "default-values.yaml"), "--set-string", `redis.url=redis://a:6379\,b:6379`).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "redis.url: list further hosts as ?addr=") {
		t.Errorf("helm template with hosts separated by a comma: %v, want a refusal\n%s", err, out)
	}
}
