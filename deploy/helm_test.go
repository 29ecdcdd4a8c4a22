package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flashsale/flashsale/internal/config"
)

// chart is the Helm chart's directory.
var chart = filepath.Join(root, "deploy", "helm", "flashsale")

// kubeVersion is the Kubernetes the chart is rendered for: the oldest it
// supports (Chart.yaml's kubeVersion; helm template, with no cluster,
// assumes an old default otherwise).
const kubeVersion = "1.30.0"

// helm is the helm binary (built from its Go module by `make test`:
// scripts/ensure-test-servers.sh); its absence fails the test.
func helm(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("helm")
	if err != nil {
		gobin := filepath.Join(os.Getenv("HOME"), "go", "bin", "helm")
		if out, e := exec.Command("go", "env", "GOPATH").Output(); e == nil {
			gobin = filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		}
		if _, e := os.Stat(gobin); e == nil {
			return gobin
		}
		t.Fatalf("helm is not installed (%v). `make test` builds it (scripts/ensure-test-servers.sh: go install helm.sh/helm/v3/cmd/helm)", err)
	}
	return p
}

// rendered is one value set's objects, decoded strictly (unknown fields
// refused) into the Kubernetes API's own types and prometheus-operator's.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	policies     map[string]*networkingv1.NetworkPolicy
	ingresses    map[string]*networkingv1.Ingress
	accounts     map[string]*corev1.ServiceAccount
	monitors     map[string]*monitoringv1.ServiceMonitor
	rules        map[string]*monitoringv1.PrometheusRule
	kinds        []string
	renderOutput string
}

// strict decodes a YAML document into out, refusing a field out's type does
// not have (a typo in a template would otherwise be dropped silently by the
// API server's lenient decoding, or refused at install).
func strict(doc []byte, out any) error {
	j, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

func render(t *testing.T, values string) rendered {
	t.Helper()
	out, err := exec.Command(helm(t), "template", "shop", chart, "--namespace", "shop", "--kube-version", kubeVersion,
		"-f", filepath.Join(chart, "ci", values)).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template -f %s: %v\n%s", values, err, out)
	}
	r := rendered{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		policies: map[string]*networkingv1.NetworkPolicy{}, ingresses: map[string]*networkingv1.Ingress{},
		accounts: map[string]*corev1.ServiceAccount{}, monitors: map[string]*monitoringv1.ServiceMonitor{},
		rules: map[string]*monitoringv1.PrometheusRule{}, renderOutput: string(out)}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: a document is not YAML: %v\n%s", values, err, doc)
		}
		if head.Kind == "" {
			continue // only comments
		}
		name := head.Metadata.Name
		var obj any
		switch head.Kind {
		case "Deployment":
			r.deployments[name] = &appsv1.Deployment{}
			obj = r.deployments[name]
		case "Service":
			r.services[name] = &corev1.Service{}
			obj = r.services[name]
		case "ConfigMap":
			r.configMaps[name] = &corev1.ConfigMap{}
			obj = r.configMaps[name]
		case "Secret":
			r.secrets[name] = &corev1.Secret{}
			obj = r.secrets[name]
		case "HorizontalPodAutoscaler":
			r.hpas[name] = &autoscalingv2.HorizontalPodAutoscaler{}
			obj = r.hpas[name]
		case "PodDisruptionBudget":
			r.pdbs[name] = &policyv1.PodDisruptionBudget{}
			obj = r.pdbs[name]
		case "NetworkPolicy":
			r.policies[name] = &networkingv1.NetworkPolicy{}
			obj = r.policies[name]
		case "Ingress":
			r.ingresses[name] = &networkingv1.Ingress{}
			obj = r.ingresses[name]
		case "ServiceAccount":
			r.accounts[name] = &corev1.ServiceAccount{}
			obj = r.accounts[name]
		case "ServiceMonitor":
			r.monitors[name] = &monitoringv1.ServiceMonitor{}
			obj = r.monitors[name]
		case "PrometheusRule":
			r.rules[name] = &monitoringv1.PrometheusRule{}
			obj = r.rules[name]
		default:
			t.Fatalf("%s: a %s (%s) the test does not know: add its type", values, head.Kind, name)
		}
		if err := strict(doc, obj); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly into its API type: %v\n%s", values, head.Kind, name, err, doc)
		}
		r.kinds = append(r.kinds, head.Kind+"/"+name)
	}
	return r
}

// `helm lint` passes with every documented value set, and fails, saying
// what is missing, without the values that have no default.
func TestHelm_lint(t *testing.T) {
	bin := helm(t)
	for _, values := range []string{"default-values.yaml", "sentinel-values.yaml", "cluster-values.yaml"} {
		out, err := exec.Command(bin, "lint", "--strict", "--kube-version", kubeVersion, chart, "-f", filepath.Join(chart, "ci", values)).CombinedOutput()
		if err != nil {
			t.Errorf("helm lint -f %s: %v\n%s", values, err, out)
		}
	}
	out, err := exec.Command(bin, "template", "shop", chart, "--kube-version", kubeVersion).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "redis.url is required") {
		t.Errorf("helm template with no values: %v, want a refusal naming redis.url\n%s", err, out)
	}
	out, err = exec.Command(bin, "template", "shop", chart, "--kube-version", kubeVersion, "-f", filepath.Join(chart, "ci", "default-values.yaml"),
		"--set", "secrets.adminToken=short").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "secrets.adminToken: 32 bytes or more") {
		t.Errorf("helm template with a short admin token: %v, want a refusal\n%s", err, out)
	}
}

// What an operator relies on, in each value set: probes on the right paths
// and ports, graceful shutdown longer than SHUTDOWN_TIMEOUT, resources,
// the Secret and ConfigMap every container reads, a configuration the
// service itself accepts, the autoscaler and disruption budgets, the
// ServiceMonitor on a port the Services have with the jobs the alerts
// name, NetworkPolicies letting only the ingress controller and Prometheus
// in, and an Ingress that routes only the shop's paths.
func TestHelm_templates_decodeStrictly_andHoldWhatOperatorsRelyOn(t *testing.T) {
	for _, tc := range []struct {
		values                     string
		mode                       string
		hpa, policies, adminIngres bool
		shutdown                   int64
	}{
		{"default-values.yaml", "standalone", true, true, false, 15},
		{"sentinel-values.yaml", "sentinel", true, true, true, 15},
		{"cluster-values.yaml", "cluster", false, false, false, 30},
	} {
		t.Run(tc.values, func(t *testing.T) {
			r := render(t, tc.values)
			api, worker := r.deployments["shop-flashsale-api"], r.deployments["shop-flashsale-worker"]
			if api == nil || worker == nil {
				t.Fatalf("deployments %v", r.kinds)
			}
			cm := r.configMaps["shop-flashsale"]
			if cm == nil {
				t.Fatalf("no ConfigMap: %v", r.kinds)
			}
			secretName := "shop-flashsale"
			if tc.mode == "sentinel" {
				secretName = "flashsale-secrets" // existingSecret: the chart makes none
				if len(r.secrets) != 0 {
					t.Errorf("with existingSecret the chart made %v", r.kinds)
				}
			}
			for _, d := range []*appsv1.Deployment{api, worker} {
				checkPod(t, d, cm.Name, secretName, tc.shutdown)
			}
			checkProbes(t, api, 8080)
			checkProbes(t, worker, 8081)
			if api.Spec.Template.Spec.Containers[0].Command[0] != "/usr/local/bin/api" ||
				worker.Spec.Template.Spec.Containers[0].Command[0] != "/usr/local/bin/worker" {
				t.Errorf("commands: api %v, worker %v", api.Spec.Template.Spec.Containers[0].Command, worker.Spec.Template.Spec.Containers[0].Command)
			}
			if ps := api.Spec.Template.Spec.Containers[0].Lifecycle; ps == nil || ps.PreStop == nil || ps.PreStop.Sleep == nil {
				t.Errorf("api: no preStop sleep (the endpoints must drop it before SIGTERM)")
			}

			// The configuration, with the Secret's keys, is one the service accepts.
			env := map[string]string{}
			for k, v := range cm.Data {
				env[k] = v
			}
			if s := r.secrets[secretName]; s != nil {
				for k, v := range s.StringData {
					env[k] = v
				}
			} else {
				env["JWT_SECRET"], env["ADMIN_TOKEN"] = strings.Repeat("j", 32), strings.Repeat("a", 32)
				env["MYSQL_DSN"], env["REDIS_URL"] = "u:p@tcp(mysql:3306)/f?parseTime=true", "redis://s0:26379/0?addr=s1:26379"
				env["STRIPE_SECRET_KEY"], env["STRIPE_WEBHOOK_SECRET"] = "sk_test", "whsec"
			}
			cfg, err := config.FromMap(env)
			if err != nil {
				t.Fatalf("the service refuses the chart's configuration: %v", err)
			}
			if err := cfg.CheckPayments(); err != nil {
				t.Errorf("payments: %v", err)
			}
			switch tc.mode {
			case "sentinel":
				if cfg.RedisSentinelMaster != "mymaster" || cfg.RedisAckReplicas != 1 {
					t.Errorf("sentinel: master %q, ack replicas %d", cfg.RedisSentinelMaster, cfg.RedisAckReplicas)
				}
			case "cluster":
				if !cfg.RedisCluster {
					t.Errorf("cluster mode without REDIS_CLUSTER")
				}
			default:
				if cfg.RedisCluster || cfg.RedisSentinelMaster != "" {
					t.Errorf("standalone: cluster %v, sentinel %q", cfg.RedisCluster, cfg.RedisSentinelMaster)
				}
			}

			hpa := r.hpas["shop-flashsale-api"]
			if (hpa != nil) != tc.hpa {
				t.Fatalf("autoscaler %v, want %v", hpa != nil, tc.hpa)
			}
			if hpa != nil {
				if hpa.Spec.ScaleTargetRef.Name != api.Name || api.Spec.Replicas != nil || *hpa.Spec.MinReplicas < 2 {
					t.Errorf("autoscaler: target %s, min %d, deployment replicas %v (the autoscaler owns them)",
						hpa.Spec.ScaleTargetRef.Name, *hpa.Spec.MinReplicas, api.Spec.Replicas)
				}
			} else if api.Spec.Replicas == nil || *api.Spec.Replicas != 4 {
				t.Errorf("without the autoscaler: replicas %v, want 4", api.Spec.Replicas)
			}
			for name, d := range map[string]*appsv1.Deployment{"shop-flashsale-api": api, "shop-flashsale-worker": worker} {
				pdb := r.pdbs[name]
				if pdb == nil || !matches(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
					t.Errorf("%s: no disruption budget selecting its pods", name)
				}
			}

			checkServiceMonitor(t, r, api, worker)
			checkPolicies(t, r, tc.policies, api, worker)
			checkIngresses(t, r, tc.adminIngres)
		})
	}
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPod(t *testing.T, d *appsv1.Deployment, configMap, secret string, shutdown int64) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if !matches(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: its selector does not select its pods", d.Name)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < shutdown+5 {
		t.Errorf("%s: terminationGracePeriodSeconds %v, want SHUTDOWN_TIMEOUT (%d s) and a margin", d.Name, spec.TerminationGracePeriodSeconds, shutdown)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", d.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: resources %v: want cpu and memory requests and a memory limit", d.Name, c.Resources)
	}
	var fromCM, fromSecret bool
	for _, e := range c.EnvFrom {
		fromCM = fromCM || e.ConfigMapRef != nil && e.ConfigMapRef.Name == configMap
		fromSecret = fromSecret || e.SecretRef != nil && e.SecretRef.Name == secret
	}
	if !fromCM || !fromSecret {
		t.Errorf("%s: envFrom %v, want the ConfigMap %s and the Secret %s", d.Name, c.EnvFrom, configMap, secret)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: want a non-root pod with a read-only root filesystem", d.Name)
	}
}

func checkProbes(t *testing.T, d *appsv1.Deployment, port int32) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	named := map[string]int32{}
	for _, p := range c.Ports {
		named[p.Name] = p.ContainerPort
	}
	for what, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[what]
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
			t.Errorf("%s: %s probe %v, want GET %s", d.Name, what, probe, want)
			continue
		}
		if p := probe.HTTPGet.Port; named[p.StrVal] != port && p.IntVal != port {
			t.Errorf("%s: %s probe on port %v, want %d", d.Name, what, p.String(), port)
		}
	}
}

func checkServiceMonitor(t *testing.T, r rendered, api, worker *appsv1.Deployment) {
	t.Helper()
	if len(r.monitors) != 1 || len(r.rules) != 1 {
		t.Fatalf("monitors %d, rules %d: %v", len(r.monitors), len(r.rules), r.kinds)
	}
	var sm *monitoringv1.ServiceMonitor
	for _, m := range r.monitors {
		sm = m
	}
	jobs := map[string]bool{}
	for _, d := range []*appsv1.Deployment{api, worker} {
		// The Service of the deployment's pods, as the ServiceMonitor selects it.
		var svc *corev1.Service
		for _, s := range r.services {
			if matches(s.Spec.Selector, d.Spec.Template.Labels) {
				svc = s
			}
		}
		if svc == nil {
			t.Fatalf("%s: no Service selects its pods", d.Name)
		}
		if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("the ServiceMonitor does not select the Service %s", svc.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port })
			if i < 0 || ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %s%s: the Service %s has no such port (%v)", ep.Port, ep.Path, svc.Name, svc.Spec.Ports)
				continue
			}
			target := svc.Spec.Ports[i].TargetPort.StrVal
			cport := d.Spec.Template.Spec.Containers[0].Ports[0]
			if target != cport.Name {
				t.Errorf("%s: the Service targets %q, the container's port is %q", svc.Name, target, cport.Name)
			}
		}
		jobs[svc.Labels[sm.Spec.JobLabel]] = true
	}
	if !jobs["flashsale-api"] || !jobs["flashsale-worker"] {
		t.Errorf("jobs %v: want flashsale-api and flashsale-worker, as the alerts and dashboard name them", jobs)
	}
	var pr *monitoringv1.PrometheusRule
	for _, p := range r.rules {
		pr = p
	}
	alerts := 0
	for _, g := range pr.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert != "" {
				alerts++
			}
		}
	}
	if alerts < 15 {
		t.Errorf("the PrometheusRule has %d alerts: not the deployed rules", alerts)
	}
}

func checkPolicies(t *testing.T, r rendered, want bool, api, worker *appsv1.Deployment) {
	t.Helper()
	if !want {
		if len(r.policies) != 0 {
			t.Errorf("NetworkPolicies with networkPolicy.enabled false: %v", r.kinds)
		}
		return
	}
	from := func(d *appsv1.Deployment) []string {
		var pol *networkingv1.NetworkPolicy
		for _, p := range r.policies {
			if matches(p.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
				if pol != nil {
					t.Errorf("%s: two policies select it", d.Name)
				}
				pol = p
			}
		}
		if pol == nil {
			t.Fatalf("%s: no NetworkPolicy selects its pods", d.Name)
		}
		if !slices.Equal(pol.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(pol.Spec.Ingress) != 1 {
			t.Fatalf("%s: policy %v", d.Name, pol.Spec)
		}
		rule := pol.Spec.Ingress[0]
		if len(rule.Ports) != 1 || rule.Ports[0].Port.StrVal != d.Spec.Template.Spec.Containers[0].Ports[0].Name {
			t.Errorf("%s: policy ports %v, want its http port alone", d.Name, rule.Ports)
		}
		var ns []string
		for _, peer := range rule.From {
			if peer.NamespaceSelector == nil || peer.PodSelector != nil || peer.IPBlock != nil {
				t.Errorf("%s: a peer that is not a namespace: %v", d.Name, peer)
				continue
			}
			ns = append(ns, peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
		}
		slices.Sort(ns)
		return ns
	}
	if got := from(api); fmt.Sprint(got) != "[ingress-nginx monitoring]" {
		t.Errorf("the apis take traffic from %v, want the ingress controller and Prometheus", got)
	}
	if got := from(worker); fmt.Sprint(got) != "[monitoring]" {
		t.Errorf("the workers take traffic from %v, want Prometheus alone", got)
	}
}

func checkIngresses(t *testing.T, r rendered, admin bool) {
	t.Helper()
	public := r.ingresses["shop-flashsale"]
	if public == nil {
		t.Fatalf("no public Ingress: %v", r.kinds)
	}
	var paths []string
	for _, rule := range public.Spec.Rules {
		for _, p := range rule.HTTP.Paths {
			paths = append(paths, p.Path)
			if p.Backend.Service == nil || p.Backend.Service.Name != "shop-flashsale-api" {
				t.Errorf("public path %s goes to %v", p.Path, p.Backend)
			}
		}
	}
	if fmt.Sprint(paths) != "[/v1/ /webhooks/]" {
		t.Errorf("the public Ingress routes %v: want the shop's /v1/ and /webhooks/ only (never /metrics, /readyz, /admin/)", paths)
	}
	a := r.ingresses["shop-flashsale-admin"]
	if (a != nil) != admin {
		t.Fatalf("admin ingress %v, want %v", a != nil, admin)
	}
	if a != nil && (a.Spec.IngressClassName == nil || *a.Spec.IngressClassName == *public.Spec.IngressClassName) {
		t.Errorf("the admin Ingress shares the public ingress class")
	}
}

// The chart's PrometheusRule carries the deployed rules: its copy is the
// same file as deploy/prometheus's (Helm reads only inside the chart).
func TestHelm_rulesCopy_isTheDeployedRules(t *testing.T) {
	a, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "flashsale.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chart, "files", "flashsale.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("deploy/helm/flashsale/files/flashsale.rules.yml differs from deploy/prometheus/flashsale.rules.yml: cp the latter over the former")
	}
}
