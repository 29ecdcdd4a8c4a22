package deploy

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtool is Prometheus's own checker (Debian's prometheus package, which
// `make test` installs); its absence fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (%v), so the alerting rules cannot be checked. "+
			"`make test` installs it (scripts/ensure-test-servers.sh); or: apt-get install prometheus", err)
	}
	return p
}

// The alerting rules are valid (promtool check rules: syntax, PromQL, no
// duplicate alerts) and behave as their unit tests say (promtool test
// rules: which alert fires when, with which labels and text, for series
// that mimic a worker stopped, a failover, a 5xx burst, a lost lock).
func TestPrometheusRules_promtoolChecksAndUnitTests(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(root, "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "flashsale.rules.yml"},
		{"test", "rules", "flashsale.rules.test.yml"},
		{"check", "config", "--syntax-only", "prometheus.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
