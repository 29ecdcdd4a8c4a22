package deploy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flashsale/flashsale/internal/config"
)

// kubernetesDoc is the page that tells an operator how to install the chart.
var kubernetesDoc = filepath.Join(root, "docs", "kubernetes.md")

// docBlocks returns the fenced code blocks of a Markdown file by their
// language (the word after the opening fence).
func docBlocks(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	var lang string
	var cur []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				blocks[lang] = append(blocks[lang], strings.Join(cur, "\n"))
				in, cur = false, nil
			} else {
				in, lang = true, strings.TrimPrefix(line, "```")
			}
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return blocks
}

// docCommands returns the sh blocks' commands of path that start with
// prefix, continuation lines joined.
func docCommands(t *testing.T, path, prefix string) []string {
	t.Helper()
	var cmds []string
	for _, b := range docBlocks(t, path)["sh"] {
		for _, c := range strings.Split(strings.ReplaceAll(b, "\\\n", " "), "\n") {
			if strings.HasPrefix(c, prefix) {
				cmds = append(cmds, c)
			}
		}
	}
	return cmds
}

// The page's values file and its helm commands work as written, from the
// repository's root: lint and template with --kube-version; template
// without it refuses with the error the page quotes; install (which asks
// the cluster for its version and has no --kube-version) against a stand-in
// Kubernetes 1.30 API server. The page's Secret with those values is a
// configuration the service accepts, its REDIS_URL naming each sentinel.
func TestHelmDocs_valuesAndCommands_workAsWritten(t *testing.T) {
	bin := helm(t)
	var values string
	for _, b := range docBlocks(t, kubernetesDoc)["yaml"] {
		if strings.HasPrefix(b, "# my-values.yaml\n") {
			values = b
		}
	}
	if values == "" {
		t.Fatal("docs/kubernetes.md has no yaml block headed # my-values.yaml")
	}
	valuesFile := filepath.Join(t.TempDir(), "my-values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string, env ...string) (string, error) {
		t.Helper()
		args := strings.Fields(strings.ReplaceAll(cmd, "my-values.yaml", valuesFile))
		c := exec.Command(bin, args[1:]...)
		c.Dir, c.Env = root, append(os.Environ(), env...)
		out, err := c.CombinedOutput()
		return string(out), err
	}

	ran := map[string]bool{}
	for _, prefix := range []string{"helm lint ", "helm template "} {
		for _, cmd := range docCommands(t, kubernetesDoc, prefix) {
			if !strings.Contains(cmd, "--kube-version 1.30.0") {
				t.Errorf("%s: no --kube-version 1.30.0 (helm assumes Kubernetes 1.20 without a cluster)", cmd)
			}
			out, err := run(cmd)
			if err != nil {
				t.Errorf("%s: %v\n%s", cmd, err, out)
			}
			ran[prefix] = true
			if prefix == "helm template " {
				checkDocSecret(t, out)
				out, err = run(strings.Replace(cmd, "--kube-version 1.30.0", "", 1))
				quoted := "Error: chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.20.0"
				if err == nil || !strings.Contains(out, quoted) {
					t.Errorf("without --kube-version: %v, want the page's quote %q\n%s", err, quoted, out)
				}
				if raw, _ := os.ReadFile(kubernetesDoc); !bytes.Contains(raw, []byte(quoted)) {
					t.Errorf("the page does not quote %q", quoted)
				}
			}
		}
	}
	kubeconfig := fakeKubernetes(t)
	for _, cmd := range docCommands(t, kubernetesDoc, "helm install ") {
		// The stand-in serves discovery but no OpenAPI schema: the objects'
		// schemas are checked by the strict decoding of helm_test.go.
		out, err := run(cmd+" --dry-run=client --disable-openapi-validation", "KUBECONFIG="+kubeconfig)
		if err != nil || !strings.Contains(out, "STATUS: pending-install") {
			t.Errorf("%s (dry run on Kubernetes 1.30): %v\n%s", cmd, err, out)
		}
		ran["helm install "] = true
	}
	if len(ran) != 3 {
		t.Errorf("ran %v: want helm lint, template and install commands on the page", ran)
	}
}

// checkDocSecret reads the page's `kubectl create secret` command and checks
// that with the rendered ConfigMap it makes a configuration the service
// accepts, its sentinels each an address.
func checkDocSecret(t *testing.T, rendered string) {
	t.Helper()
	env := map[string]string{}
	for _, doc := range strings.Split(rendered, "\n---") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := sigsyaml.Unmarshal([]byte(doc), &cm); err == nil && cm.Kind == "ConfigMap" {
			for k, v := range cm.Data {
				env[k] = v
			}
		}
	}
	secrets := docCommands(t, kubernetesDoc, "kubectl -n shop create secret generic flashsale-secrets ")
	if len(secrets) != 1 {
		t.Fatalf("want one kubectl create secret command on the page, got %d", len(secrets))
	}
	for _, m := range regexp.MustCompile(`--from-literal=([A-Z_]+)=('[^']*'|\$\([^)]*\)|\S+)`).FindAllStringSubmatch(secrets[0], -1) {
		v := strings.Trim(m[2], "'")
		if strings.HasPrefix(v, "$(openssl rand -hex ") {
			v = strings.Repeat("0", 64)
		}
		env[m[1]] = v
	}
	cfg, err := config.FromMap(env)
	if err != nil {
		t.Fatalf("the page's Secret and values: %v", err)
	}
	if err := cfg.CheckPayments(); err != nil {
		t.Errorf("the page's Secret and values: %v", err)
	}
	opt, err := redis.ParseFailoverURL(cfg.RedisURL)
	if err != nil || cfg.RedisSentinelMaster == "" || len(opt.SentinelAddrs) != 3 {
		t.Errorf("the page's REDIS_URL %q, master %q: want three sentinels (%v)", cfg.RedisURL, cfg.RedisSentinelMaster, err)
	}
}

// fakeKubernetes serves what `helm install --dry-run=client` asks of a
// cluster: its version (1.30) and the API groups of the chart's kinds, the
// Prometheus Operator's included. It returns a kubeconfig naming it.
func fakeKubernetes(t *testing.T) string {
	t.Helper()
	groups := map[string][]string{
		"v1":                       {"configmaps:ConfigMap", "secrets:Secret", "services:Service", "serviceaccounts:ServiceAccount"},
		"apps/v1":                  {"deployments:Deployment"},
		"policy/v1":                {"poddisruptionbudgets:PodDisruptionBudget"},
		"networking.k8s.io/v1":     {"networkpolicies:NetworkPolicy", "ingresses:Ingress"},
		"autoscaling/v2":           {"horizontalpodautoscalers:HorizontalPodAutoscaler"},
		"monitoring.coreos.com/v1": {"servicemonitors:ServiceMonitor", "prometheusrules:PrometheusRule"},
	}
	resources := func(gv string) any {
		var rs []map[string]any
		for _, r := range groups[gv] {
			name, kind, _ := strings.Cut(r, ":")
			rs = append(rs, map[string]any{"name": name, "singularName": "", "namespaced": true, "kind": kind,
				"verbs": []string{"create", "delete", "get", "list", "patch", "update", "watch"}})
		}
		return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		switch p := r.URL.Path; {
		case p == "/version":
			body = map[string]string{"major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"}
		case p == "/api":
			body = map[string]any{"kind": "APIVersions", "versions": []string{"v1"}, "serverAddressByClientCIDRs": []any{}}
		case p == "/api/v1":
			body = resources("v1")
		case p == "/apis":
			var list []any
			for gv := range groups {
				if g, v, ok := strings.Cut(gv, "/"); ok {
					ver := map[string]string{"groupVersion": gv, "version": v}
					list = append(list, map[string]any{"name": g, "versions": []any{ver}, "preferredVersion": ver})
				}
			}
			body = map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": list}
		case groups[strings.TrimPrefix(p, "/apis/")] != nil:
			body = resources(strings.TrimPrefix(p, "/apis/"))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\ncurrent-context: fake\n" +
		"clusters: [{name: fake, cluster: {server: \"" + srv.URL + "\"}}]\n" +
		"users: [{name: fake, user: {}}]\n" +
		"contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
