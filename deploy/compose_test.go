package deploy

import (
	"cmp"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/health"
)

// The topology: a Redis primary and a replica with append-only files, three
// sentinels, MySQL 8, two API replicas behind nginx, one worker; every
// service health-checked, on the private network, started after what it
// needs is healthy; the application's settings valid and consistent.
func TestCompose_topology(t *testing.T) {
	c := loadCompose(t, testSecrets)
	tp := roles(t, c)

	t.Run("every service is health-checked and on the network", func(t *testing.T) {
		for name, s := range c.Services {
			h := s.Healthcheck
			if h == nil || h.Disable || len(h.Test) < 2 || (h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL") {
				t.Errorf("service %s: healthcheck %+v; want a CMD or CMD-SHELL test", name, h)
				continue
			}
			if h.Interval == "" || h.Timeout == "" || h.Retries == 0 {
				t.Errorf("service %s: healthcheck %+v: set interval, timeout and retries", name, h)
			}
			if _, ok := s.Networks[tp.network]; !ok || s.NetworkMode != "" {
				t.Errorf("service %s: not on network %s (network_mode %q)", name, tp.network, s.NetworkMode)
			}
			if len(s.Ports) > 0 && name != tp.nginx {
				t.Errorf("service %s publishes ports %v; only nginx faces clients, the rest stays on %s", name, s.Ports, tp.network)
			}
			for dep, d := range s.DependsOn {
				if d.Condition != "service_healthy" {
					t.Errorf("service %s depends on %s with condition %q; want service_healthy", name, dep, d.Condition)
				}
				if c.Services[dep] == nil || c.Services[dep].Healthcheck == nil {
					t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			}
		}
	})

	t.Run("every redis server keeps accepted orders in an append-only file of its own", func(t *testing.T) {
		volumes := map[string]string{}
		for _, name := range append([]string{tp.redis}, tp.replicas...) {
			s := c.Services[name]
			if !strings.HasPrefix(s.Image, "redis:7") {
				t.Errorf("%s: image %q; want redis:7", name, s.Image)
			}
			if len(s.Command) == 0 || s.Command[0] != "redis-server" {
				t.Fatalf("%s: command %q; want redis-server with options", name, s.Command)
			}
			// The replica gets the primary's settings: it may become it.
			opts := redisOpts(s.Command)
			for flag, want := range map[string]string{"--appendonly": "yes", "--appendfsync": "everysec", "--maxmemory-policy": "noeviction"} {
				if got := opts[flag]; !slices.Equal(got, []string{want}) {
					t.Errorf("%s: %s %q; want %q (command %q)", name, flag, got, want, s.Command)
				}
			}
			vol, ok := namedVolumeAt(t, c, s, "/data")
			if !ok {
				t.Errorf("%s: no named volume at /data (the append-only file's directory): %v", name, s.Volumes)
			} else if other, shared := volumes[vol]; shared {
				t.Errorf("%s and %s share the volume %s: each server needs its own append-only file", other, name, vol)
			}
			volumes[vol] = name
		}
	})

	t.Run("the replica replicates the primary, and every server announces its service name", func(t *testing.T) {
		if len(tp.replicas) == 0 {
			t.Fatal("no Redis replica (redis-server --replicaof): a failover would have nothing to promote")
		}
		primary := c.Services[tp.redis]
		for _, name := range tp.replicas {
			s := c.Services[name]
			if want := []string{tp.redis, redisPort(primary.Command)}; !slices.Equal(redisOpts(s.Command)["--replicaof"], want) {
				t.Errorf("%s: --replicaof %q; want the primary, %q", name, redisOpts(s.Command)["--replicaof"], want)
			}
			if s.Image != primary.Image {
				t.Errorf("%s: image %q; want the primary's, %q", name, s.Image, primary.Image)
			}
			if s.DependsOn[tp.redis].Condition != "service_healthy" {
				t.Errorf("%s: does not wait for %s to be healthy before it replicates it", name, tp.redis)
			}
		}
		// A server that is (or, after a failover, becomes) a replica is
		// reported by its primary, and handed out by the sentinels, under
		// the address it announces: its container IP unless told, which
		// changes when the container is recreated. Its service name
		// resolves on the network whatever its IP.
		for _, name := range append([]string{tp.redis}, tp.replicas...) {
			if got := redisOpts(c.Services[name].Command)["--replica-announce-ip"]; !slices.Equal(got, []string{name}) {
				t.Errorf("%s: --replica-announce-ip %q; want its service name, %q", name, got, name)
			}
		}
	})

	t.Run("the sentinels watch the primary, and a majority of them decides", func(t *testing.T) {
		n := len(tp.sentinels)
		if n < 3 {
			t.Fatalf("sentinels %v; want three or more: a majority must remain when one is lost", tp.sentinels)
		}
		primary := c.Services[tp.redis]
		volumes := map[string]string{}
		var master string
		for _, name := range tp.sentinels {
			s := c.Services[name]
			if s.Image != primary.Image {
				t.Errorf("%s: image %q; want the Redis servers', %q", name, s.Image, primary.Image)
			}
			conf, _ := writtenSentinelConf(t, c, name, t.TempDir())
			mon, ok := conf.get("sentinel", "monitor")
			if !ok || len(mon) != 4 {
				t.Errorf("%s: no \"sentinel monitor <name> <host> <port> <quorum>\" in the configuration it writes:\n%s", name, conf.text)
				continue
			}
			if master == "" {
				master = mon[0]
			} else if mon[0] != master {
				t.Errorf("%s monitors %q, another sentinel %q: they must watch one primary under one name", name, mon[0], master)
			}
			if mon[1] != tp.redis || mon[2] != redisPort(primary.Command) {
				t.Errorf("%s monitors %s:%s; want the primary's service, %s:%s", name, mon[1], mon[2], tp.redis, redisPort(primary.Command))
			}
			// Quorum: how many agree the primary is down. Electing the
			// sentinel that fails over takes a majority anyway; a quorum
			// below it lets a minority cut off from the primary start
			// asking, one above the count never fails over.
			if q, err := strconv.Atoi(mon[3]); err != nil || q <= n/2 || q > n {
				t.Errorf("%s: quorum %s; want a majority of the %d sentinels (%d to %d)", name, mon[3], n, n/2+1, n)
			}
			for _, opt := range []string{"resolve-hostnames", "announce-hostnames"} {
				if v, _ := conf.get("sentinel", opt); !slices.Equal(v, []string{"yes"}) {
					t.Errorf("%s: sentinel %s %q; want yes: the servers are known by their compose hostnames, "+
						"which must be what clients are handed after a failover", name, opt, v)
				}
			}
			for _, opt := range []string{"down-after-milliseconds", "failover-timeout"} {
				if v, ok := conf.get("sentinel", opt); !ok || len(v) != 2 || v[0] != mon[0] {
					t.Errorf("%s: no sentinel %s for %s: state the failover timing (and explain it)", name, opt, mon[0])
				}
			}
			for _, dep := range append([]string{tp.redis}, tp.replicas...) {
				if s.DependsOn[dep].Condition != "service_healthy" {
					t.Errorf("%s: does not wait for %s to be healthy", name, dep)
				}
			}
			// Its learned state (the current primary, its own id) is on
			// a volume of its own.
			vol, ok := namedVolumeAt(t, c, s, "/data")
			if !ok {
				t.Errorf("%s: no named volume at /data, where its configuration and state live: %v", name, s.Volumes)
			} else if other, shared := volumes[vol]; shared {
				t.Errorf("%s and %s share the volume %s", other, name, vol)
			}
			volumes[vol] = name
			port, _ := conf.get("port")
			if h := s.Healthcheck; h == nil || len(h.Test) < 2 || !strings.Contains(h.Test[len(h.Test)-1], "-p "+strings.Join(port, "")) ||
				!strings.Contains(h.Test[len(h.Test)-1], master) {
				t.Errorf("%s: healthcheck %+v does not ask this sentinel (port %v) about %s", name, h, port, master)
			}
		}
	})
	t.Run("mysql 8 with a volume, and the DSN matches it", func(t *testing.T) {
		s := c.Services[tp.sql]
		if !strings.HasPrefix(s.Image, "mysql:8") {
			t.Errorf("mysql image %q; want mysql 8", s.Image)
		}
		if !hasNamedVolume(t, c, s, "/var/lib/mysql") {
			t.Errorf("mysql: no named volume at /var/lib/mysql: %v", s.Volumes)
		}
		menv := s.env()
		if menv["MYSQL_ROOT_PASSWORD"] != testSecrets["MYSQL_ROOT_PASSWORD"] {
			t.Errorf("MYSQL_ROOT_PASSWORD %q; want it from the environment", menv["MYSQL_ROOT_PASSWORD"])
		}
		for _, name := range append([]string{tp.worker}, tp.apis...) {
			dsn, err := mysql.ParseDSN(c.Services[name].env()["MYSQL_DSN"])
			if err != nil {
				t.Fatalf("%s: MYSQL_DSN: %v", name, err)
			}
			if dsn.Addr != tp.sql+":3306" || dsn.DBName != menv["MYSQL_DATABASE"] || dsn.DBName == "" {
				t.Errorf("%s: MYSQL_DSN server %s database %q; want %s:3306, database %q (MYSQL_DATABASE)", name, dsn.Addr, dsn.DBName, tp.sql, menv["MYSQL_DATABASE"])
			}
			wantPw := menv["MYSQL_PASSWORD"]
			if dsn.User == "root" {
				wantPw = menv["MYSQL_ROOT_PASSWORD"]
			} else if dsn.User != menv["MYSQL_USER"] {
				t.Errorf("%s: MYSQL_DSN user %q; mysql creates %q (MYSQL_USER)", name, dsn.User, menv["MYSQL_USER"])
			}
			if dsn.Passwd != wantPw || wantPw == "" {
				t.Errorf("%s: MYSQL_DSN password %q; mysql sets %q for %s", name, dsn.Passwd, wantPw, dsn.User)
			}
		}
	})

	t.Run("the api replicas and the worker", func(t *testing.T) {
		first := c.Services[tp.apis[0]]
		for _, name := range append([]string{tp.worker}, tp.apis...) {
			s := c.Services[name]
			bin := s.Entrypoint[0]
			if s.Image == "" || s.Image != first.Image || s.Build == nil {
				t.Errorf("%s: image %q, build %v; want one image, built here, for every app service", name, s.Image, s.Build)
			} else if abs, _ := filepath.Abs(root); s.Build.Context != abs {
				t.Errorf("%s: build context %q; want the repository (%s)", name, s.Build.Context, abs)
			}
			if h := s.Healthcheck; h == nil || !slices.Equal(h.Test, []string{"CMD", bin, "healthcheck"}) {
				t.Errorf("%s: healthcheck %+v; want [CMD %s healthcheck] (no shell or curl in the image)", name, h, bin)
			} else if to := duration(t, name+" healthcheck timeout", h.Timeout); to <= health.ProbeTimeout {
				// Docker's timeout must be longer than the probe's own, or
				// it kills the probe before it says why it failed.
				t.Errorf("%s: healthcheck timeout %v; want more than the probe's own %v", name, to, health.ProbeTimeout)
			}
			for _, dep := range append([]string{tp.sql}, tp.sentinels...) {
				if s.DependsOn[dep].Condition != "service_healthy" {
					t.Errorf("%s: does not wait for %s to be healthy", name, dep)
				}
			}
			env := s.env()
			if _, err := config.FromMap(env); err != nil {
				t.Errorf("%s: the service's own configuration parser refuses its environment: %v", name, err)
			}
			known := configVars()
			for k := range env {
				if !known[k] {
					t.Errorf("%s: environment variable %s is not a setting of internal/config", name, k)
				}
			}
			checkRedisEnv(t, c, tp, name)
			grace := duration(t, name+" stop_grace_period", s.StopGracePeriod)
			if shutdown := duration(t, name+" SHUTDOWN_TIMEOUT", env["SHUTDOWN_TIMEOUT"]); grace <= shutdown {
				t.Errorf("%s: stop_grace_period %v is not longer than SHUTDOWN_TIMEOUT %v: SIGKILL would cut the graceful shutdown short", name, grace, shutdown)
			}
			if s.Restart == "" || s.Restart == "no" {
				t.Errorf("%s: restart %q; want the service restarted", name, s.Restart)
			}
			if len(s.Ports) > 0 {
				t.Errorf("%s publishes ports %v; only nginx faces clients", name, s.Ports)
			}
		}
		for _, name := range tp.apis[1:] {
			if got, want := c.Services[name].env(), first.env(); !reflect.DeepEqual(got, want) {
				t.Errorf("API replicas %s and %s have different environments:\n%v\n%v", tp.apis[0], name, want, got)
			}
		}
		env := first.env()
		if env["JWT_SECRET"] != testSecrets["JWT_SECRET"] || env["ADMIN_TOKEN"] != testSecrets["ADMIN_TOKEN"] {
			t.Errorf("the API's JWT_SECRET %q and ADMIN_TOKEN %q do not come from the environment", env["JWT_SECRET"], env["ADMIN_TOKEN"])
		}
		portOf(t, tp.apiAddr)
		worker := c.Services[tp.worker]
		if worker.ContainerName != "" {
			t.Errorf("worker: container_name %q keeps it from scaling", worker.ContainerName)
		}
		portOf(t, tp.workerAddr)
		for _, secret := range []string{"JWT_SECRET", "ADMIN_TOKEN"} {
			if _, ok := worker.env()[secret]; ok {
				t.Errorf("worker: has %s, which only the API uses", secret)
			}
		}
	})

	t.Run("the api trusts nginx, and only the compose network", func(t *testing.T) {
		for _, name := range tp.apis {
			proxies := c.Services[name].env()["TRUSTED_PROXIES"]
			if proxies != tp.subnet.String() {
				t.Errorf("%s: TRUSTED_PROXIES %q; want the %s network's subnet %s, from which nginx gets its address "+
					"(and nothing wider: whoever is trusted can set the client IP)", name, proxies, tp.network, tp.subnet)
			}
		}
	})

	t.Run("nginx balances over every api replica", func(t *testing.T) {
		s := c.Services[tp.nginx]
		for _, name := range tp.apis {
			if s.DependsOn[name].Condition != "service_healthy" {
				t.Errorf("nginx does not wait for %s to be healthy", name)
			}
		}
		abs, _ := filepath.Abs(filepath.Join(root, "deploy", "nginx", "nginx.conf"))
		if !slices.Contains(s.mounts(t), mount{Source: abs, Target: nginxConfIn, ReadOnly: true}) {
			t.Errorf("nginx: %s is not mounted read-only at %s: %v", abs, nginxConfIn, s.Volumes)
		}
		conf := readNginxConf(t)
		public, adminPort := nginxPorts(t, s)
		if public.Published != "8080" || adminPort.Published != "8081" {
			t.Fatalf("nginx ports %+v and %+v; want the public one on 8080, the admin one on 8081", public, adminPort)
		}
		srv := conf.serverOn(public.Target)
		if srv == nil {
			t.Fatalf("nginx.conf: no server listens on %s, the port compose publishes", public.Target)
		}
		upstream := conf.proxiedUpstream(t, srv)
		var want []string
		for _, name := range tp.apis {
			want = append(want, net.JoinHostPort(name, portOf(t, tp.apiAddr)))
		}
		if got := upstream.servers(); !slices.Equal(got, want) {
			t.Errorf("nginx.conf upstream %s: servers %v; want every API replica on its HTTP_ADDR port: %v", upstream.args, got, want)
		}
		if upstream.child("keepalive") == nil {
			t.Errorf("nginx.conf upstream %s: no keepalive: a TCP handshake per request", upstream.args)
		}
		loc := srv.location("/")
		if loc == nil {
			t.Fatal("nginx.conf: no location / in the public server")
		}
		if d := loc.child("proxy_http_version"); d == nil || d.args[0] != "1.1" {
			t.Error("nginx.conf: upstream keepalive needs proxy_http_version 1.1")
		}
		headers := loc.headers()
		if v, ok := headers["Connection"]; !ok || v != "" {
			t.Errorf(`nginx.conf: upstream keepalive needs proxy_set_header Connection ""; got %q (set: %v)`, v, ok)
		}
		for _, h := range []string{"X-Forwarded-For", "X-Real-IP"} {
			if headers[h] != "$remote_addr" {
				t.Errorf("nginx.conf: proxy_set_header %s %q; want $remote_addr (nginx is the edge: a client's own header must not survive)", h, headers[h])
			}
		}
		// The admin port reaches a server of nginx.conf; what it serves:
		// TestNginx_adminOnlyOnTheAdminPort.
		if conf.serverOn(adminPort.Target) == nil {
			t.Errorf("nginx.conf: no server listens on %s, the admin port compose publishes", adminPort.Target)
		}

		// nginx's own health check reaches a server of nginx.conf.
		hc := s.Healthcheck
		var probe *url.URL
		for _, a := range hc.Test {
			if strings.HasPrefix(a, "http://") {
				probe, _ = url.Parse(a)
			}
		}
		if probe == nil {
			t.Fatalf("nginx healthcheck %v: no http:// URL", hc.Test)
		}
		if hs := conf.serverOn(probe.Host); hs == nil || hs.location("= "+probe.Path) == nil {
			t.Errorf("nginx healthcheck GETs %s, which no server and exact location of nginx.conf serves", probe)
		}
	})
}

// checkRedisEnv checks an app service's Redis settings against the Redis
// services: Sentinel mode, through exactly the sentinels, under the name
// they watch the primary by, with changes reported only once the replica
// holds them.
func checkRedisEnv(t *testing.T, c *compose, tp *topology, name string) {
	t.Helper()
	env := c.Services[name].env()
	conf, _ := writtenSentinelConf(t, c, tp.sentinels[0], t.TempDir())
	mon, _ := conf.get("sentinel", "monitor")
	port, _ := conf.get("port")
	if len(mon) == 0 || len(port) != 1 {
		t.Fatalf("%s: no sentinel monitor or port line:\n%s", tp.sentinels[0], conf.text)
	}
	if env["REDIS_SENTINEL_MASTER"] == "" || env["REDIS_SENTINEL_MASTER"] != mon[0] {
		t.Errorf("%s: REDIS_SENTINEL_MASTER %q; the sentinels know the primary as %q", name, env["REDIS_SENTINEL_MASTER"], mon[0])
	}
	// REDIS_URL is read as connect.Redis reads it in Sentinel mode.
	opt, err := redis.ParseFailoverURL(env["REDIS_URL"])
	if err != nil {
		t.Fatalf("%s: REDIS_URL %q: %v", name, env["REDIS_URL"], err)
	}
	var want []string
	for _, s := range tp.sentinels {
		want = append(want, net.JoinHostPort(s, port[0]))
	}
	got := slices.Sorted(slices.Values(opt.SentinelAddrs))
	if !slices.Equal(got, want) {
		t.Errorf("%s: REDIS_URL names the sentinels %v; want exactly the sentinel services on their port, %v", name, got, want)
	}
	// The URL's password is the primary's (and the sentinels'): it is set
	// if and only if the servers require one, and is theirs.
	for _, srv := range append([]string{tp.redis}, tp.replicas...) {
		pw := strings.Join(redisOpts(c.Services[srv].Command)["--requirepass"], "")
		if urlPw := cmp.Or(opt.Password, opt.SentinelPassword); urlPw != pw {
			t.Errorf("%s: REDIS_URL password %q; %s requires %q", name, urlPw, srv, pw)
		}
	}
	acks, err := strconv.Atoi(env["REDIS_ACK_REPLICAS"])
	if err != nil || acks != 1 {
		t.Errorf("%s: REDIS_ACK_REPLICAS %q; want 1: nothing reported that a failover could take back", name, env["REDIS_ACK_REPLICAS"])
	}
	if acks > len(tp.replicas) {
		t.Errorf("%s: REDIS_ACK_REPLICAS %d, but there are %d replicas %v: every change would time out", name, acks, len(tp.replicas), tp.replicas)
	}
}

// The variables that change the topology's parameters do so consistently.
func TestCompose_overrides(t *testing.T) {
	c := loadCompose(t, with(map[string]string{
		"REDIS_APPENDFSYNC":    "always",
		"FLASHSALE_SUBNET":     "10.201.0.0/16",
		"FLASHSALE_HTTP_PORT":  "9090",
		"FLASHSALE_ADMIN_PORT": "9091",
		"REDIS_ACK_TIMEOUT":    "2s",
	}))
	tp := roles(t, c)
	for _, name := range append([]string{tp.redis}, tp.replicas...) {
		if got, _ := argAfter(c.Services[name].Command, "--appendfsync"); got != "always" {
			t.Errorf("REDIS_APPENDFSYNC=always: %s --appendfsync %q", name, got)
		}
	}
	for _, name := range append([]string{tp.worker}, tp.apis...) {
		if got := c.Services[name].env()["REDIS_ACK_TIMEOUT"]; got != "2s" {
			t.Errorf("REDIS_ACK_TIMEOUT=2s: %s has %q", name, got)
		}
	}
	if tp.subnet.String() != "10.201.0.0/16" {
		t.Errorf("FLASHSALE_SUBNET=10.201.0.0/16: network subnet %s", tp.subnet)
	}
	for _, name := range tp.apis {
		if got := c.Services[name].env()["TRUSTED_PROXIES"]; got != "10.201.0.0/16" {
			t.Errorf("FLASHSALE_SUBNET=10.201.0.0/16: %s TRUSTED_PROXIES %q", name, got)
		}
	}
	if public, adminPort := nginxPorts(t, c.Services[tp.nginx]); public.Published != "9090" || adminPort.Published != "9091" {
		t.Errorf("FLASHSALE_HTTP_PORT=9090, FLASHSALE_ADMIN_PORT=9091: nginx ports %+v and %+v", public, adminPort)
	}
}
