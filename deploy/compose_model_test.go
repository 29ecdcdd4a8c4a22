package deploy

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// root is the repository: docker-compose.yml, the Dockerfile, .dockerignore
// and .env.example are there.
const root = ".."

// testSecrets fill in the compose file's required variables (${VAR:?…}).
var testSecrets = map[string]string{
	"JWT_SECRET":          "deploy-test-jwt-secret-0123456789abcdef",
	"ADMIN_TOKEN":         "deploy-test-admin-token-0123456789",
	"MYSQL_PASSWORD":      "deploytestmysqlpw",
	"MYSQL_ROOT_PASSWORD": "deploytestrootpw",
	"PAYMENT_PROVIDER":    "simulated",
}

// Paths in the image (Dockerfile) and in the nginx container.
const (
	apiBinary    = "/usr/local/bin/api"
	workerBinary = "/usr/local/bin/worker"
	nginxConfIn  = "/etc/nginx/nginx.conf"
)

// dockerCompose is the docker-compose binary; its absence fails the test.
func dockerCompose(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatalf("docker-compose is not installed (%v), so docker-compose.yml cannot be validated. "+
			"`make test` installs it (scripts/ensure-test-servers.sh); or: apt-get install docker-compose", err)
	}
	return p
}

// composeRun runs docker-compose on ../docker-compose.yml with only the
// variables in env, given as its .env file: the process environment is
// emptied, so neither the caller's shell nor a developer's .env leaks in.
func composeRun(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	bin := dockerCompose(t)
	dir := t.TempDir()
	var b strings.Builder
	for k, v := range env {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.Abs(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--env-file", envFile, "-f", file}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// with returns testSecrets plus extra.
func with(extra map[string]string) map[string]string {
	m := make(map[string]string, len(testSecrets)+len(extra))
	for k, v := range testSecrets {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// compose is what `docker-compose config` prints, as far as the tests read it.
type compose struct {
	Services map[string]*service `yaml:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
	Volumes map[string]any `yaml:"volumes"`
}

type service struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Entrypoint  []string       `yaml:"entrypoint"`
	Command     []string       `yaml:"command"`
	Environment map[string]any `yaml:"environment"`
	Healthcheck *healthcheck   `yaml:"healthcheck"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Networks        map[string]any `yaml:"networks"`
	NetworkMode     string         `yaml:"network_mode"`
	Ports           []any          `yaml:"ports"`
	Volumes         []any          `yaml:"volumes"`
	StopGracePeriod string         `yaml:"stop_grace_period"`
	Restart         string         `yaml:"restart"`
	ContainerName   string         `yaml:"container_name"`
}

type healthcheck struct {
	Test     []string `yaml:"test"`
	Interval string   `yaml:"interval"`
	Timeout  string   `yaml:"timeout"`
	Retries  int      `yaml:"retries"`
	Disable  bool     `yaml:"disable"`
}

// env is the service's environment as strings.
func (s *service) env() map[string]string {
	m := make(map[string]string, len(s.Environment))
	for k, v := range s.Environment {
		if v != nil {
			m[k] = fmt.Sprint(v)
		}
	}
	return m
}

// mount is one entry of a service's volumes, short or long syntax.
type mount struct {
	Source, Target string
	ReadOnly       bool
}

func (s *service) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			m := mount{Source: parts[0]}
			if len(parts) > 1 {
				m.Target = parts[1]
			}
			m.ReadOnly = len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro")
			out = append(out, m)
		case map[string]any:
			ro, _ := v["read_only"].(bool)
			out = append(out, mount{Source: fmt.Sprint(v["source"]), Target: fmt.Sprint(v["target"]), ReadOnly: ro})
		default:
			t.Fatalf("volume entry %v: unexpected form", v)
		}
	}
	return out
}

// port is one entry of a service's ports (published on the host, target in
// the container).
// port is a published port: on the host's HostIP (empty: every address)
// port Published, to the container's port Target.
type port struct{ HostIP, Published, Target string }

func (s *service) ports(t *testing.T) []port {
	t.Helper()
	var out []port
	for _, p := range s.Ports {
		switch p := p.(type) {
		case map[string]any:
			host, _ := p["host_ip"].(string)
			out = append(out, port{HostIP: host, Published: fmt.Sprint(p["published"]), Target: fmt.Sprint(p["target"])})
		case string: // [host_ip:]published:target[/protocol]
			p, _, _ = strings.Cut(p, "/")
			parts := strings.Split(p, ":")
			host := ""
			if len(parts) == 3 {
				host = parts[0]
			}
			out = append(out, port{HostIP: host, Published: parts[len(parts)-2], Target: parts[len(parts)-1]})
		default:
			t.Fatalf("port entry %v: unexpected form", p)
		}
	}
	return out
}

// loadCompose validates docker-compose.yml with env and returns what it
// expands to.
func loadCompose(t *testing.T, env map[string]string) *compose {
	t.Helper()
	out, err := composeRun(t, env, "config")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("docker-compose config printed YAML this test cannot read: %v\n%s", err, out)
	}
	return &c
}

// topology is the compose file's services sorted by role.
type topology struct {
	apis                []string // services running the API server
	worker, redis, sql  string   // redis: the Redis primary the file starts with
	replicas, sentinels []string // Redis replicas of it; Redis Sentinels
	nginx, network      string
	subnet              *net.IPNet
	apiAddr, workerAddr string // HTTP_ADDR, WORKER_HTTP_ADDR
}

// isSentinel says s runs Redis Sentinel: `redis-server … --sentinel` or
// redis-sentinel, directly or in its shell command.
func (s *service) isSentinel() bool {
	for _, arg := range s.Command {
		f := strings.Fields(arg)
		if slices.Contains(f, "--sentinel") || slices.Contains(f, "redis-sentinel") {
			return true
		}
	}
	return false
}

func roles(t *testing.T, c *compose) *topology {
	t.Helper()
	tp := &topology{}
	var workers, primaries []string
	for name, s := range c.Services {
		switch {
		case slices.Equal(s.Entrypoint, []string{apiBinary}) && len(s.Command) == 0:
			tp.apis = append(tp.apis, name)
		case slices.Equal(s.Entrypoint, []string{workerBinary}) && len(s.Command) == 0:
			workers = append(workers, name)
		case strings.HasPrefix(s.Image, "redis:") && s.isSentinel():
			tp.sentinels = append(tp.sentinels, name)
		case strings.HasPrefix(s.Image, "redis:") && redisOpts(s.Command)["--replicaof"] != nil:
			tp.replicas = append(tp.replicas, name)
		case strings.HasPrefix(s.Image, "redis:"):
			primaries = append(primaries, name)
		case strings.HasPrefix(s.Image, "mysql:"):
			tp.sql = name
		case strings.HasPrefix(s.Image, "nginx:"):
			tp.nginx = name
		default:
			t.Errorf("service %s: neither the api, the worker, a Redis primary, replica or sentinel, mysql nor nginx; "+
				"this test knows nothing of it", name)
		}
	}
	sort.Strings(tp.apis)
	sort.Strings(tp.replicas)
	sort.Strings(tp.sentinels)
	if len(primaries) != 1 {
		t.Fatalf("Redis primaries (redis image, no --replicaof, not a sentinel): %v; want one", primaries)
	}
	tp.redis = primaries[0]
	if len(tp.apis) < 2 {
		t.Fatalf("API services (entrypoint %s, no command): %v; want two replicas or more", apiBinary, tp.apis)
	}
	if len(workers) != 1 {
		t.Fatalf("worker services (entrypoint %s): %v; want one (scaled with --scale)", workerBinary, workers)
	}
	tp.worker = workers[0]
	if tp.redis == "" || tp.sql == "" || tp.nginx == "" {
		t.Fatalf("redis %q, mysql %q, nginx %q: each needs a service", tp.redis, tp.sql, tp.nginx)
	}
	if len(c.Networks) != 1 {
		t.Fatalf("networks %v: want one, with a fixed subnet", c.Networks)
	}
	for name, n := range c.Networks {
		tp.network = name
		if len(n.IPAM.Config) != 1 {
			t.Fatalf("network %s: ipam config %v, want one subnet", name, n.IPAM.Config)
		}
		_, subnet, err := net.ParseCIDR(n.IPAM.Config[0].Subnet)
		if err != nil {
			t.Fatalf("network %s: subnet: %v", name, err)
		}
		tp.subnet = subnet
	}
	tp.apiAddr = c.Services[tp.apis[0]].env()["HTTP_ADDR"]
	tp.workerAddr = c.Services[tp.worker].env()["WORKER_HTTP_ADDR"]
	return tp
}

// portOf is the port of a listen address such as ":8080".
func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil || p == "" || p == "0" {
		t.Fatalf("listen address %q: want a fixed port (%v)", addr, err)
	}
	return p
}

// redisOpts are redis-server's command-line options: each --option with the
// arguments that follow it up to the next --option ("--replicaof redis 6379").
func redisOpts(args []string) map[string][]string {
	opts := map[string][]string{}
	var cur string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--"):
			cur = a
			opts[cur] = []string{}
		case cur != "":
			opts[cur] = append(opts[cur], a)
		}
	}
	return opts
}

// redisPort is the port a redis-server command listens on.
func redisPort(args []string) string {
	if p := redisOpts(args)["--port"]; len(p) == 1 {
		return p[0]
	}
	return "6379"
}

// argAfter returns the argument after flag in args.
func argAfter(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return d
}

// nginxPorts are nginx's two published ports: the public one, on every
// address of the host, and the admin one, on the host's loopback only.
func nginxPorts(t *testing.T, s *service) (public, admin port) {
	t.Helper()
	ports := s.ports(t)
	if len(ports) != 2 || ports[0].HostIP != "" || ports[1].HostIP != "127.0.0.1" {
		t.Fatalf("nginx ports %+v; want two: the public one on every address, the admin one on 127.0.0.1 only", ports)
	}
	return ports[0], ports[1]
}

// hasNamedVolume says s mounts a volume of the compose file at target.
func hasNamedVolume(t *testing.T, c *compose, s *service, target string) bool {
	t.Helper()
	_, ok := namedVolumeAt(t, c, s, target)
	return ok
}

// namedVolumeAt is the volume of the compose file s mounts, writable, at
// target.
func namedVolumeAt(t *testing.T, c *compose, s *service, target string) (string, bool) {
	t.Helper()
	for _, m := range s.mounts(t) {
		if _, named := c.Volumes[m.Source]; named && m.Target == target && !m.ReadOnly {
			return m.Source, true
		}
	}
	return "", false
}
