package loadtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale/internal/testenv"
)

// StackOptions shape a local stack.
type StackOptions struct {
	APIs    int      // api processes (behind nginx when more than one, or Nginx)
	Workers int      // worker processes
	Nginx   bool     // put nginx in front even of one api
	Env     []string // extra environment for the api and worker processes
	// APIEnv and WorkerEnv are extra environment for the first api and the
	// first worker alone (a DEBUG_ADDR of its own to profile it).
	APIEnv, WorkerEnv []string
	// RedisFsync is the redis appendfsync policy (append-only on, as in
	// docker-compose.yml): everysec (default), always or no.
	RedisFsync string
	// Sentinel runs Redis as docker-compose.yml does: a primary, a replica
	// and three sentinels; the api and workers find the primary through the
	// sentinels (REDIS_SENTINEL_MASTER) and acknowledge a change only once
	// the replica has it (REDIS_ACK_REPLICAS=1).
	Sentinel bool
	// Network runs every Redis server, sentinel, api and worker as a host
	// of a testenv.Network: each finds the others by name through a link of
	// its own, a toxiproxy proxy, which Stack.Net breaks and heals (issue
	// 28's faults). MariaDB is its server "mysql", Redis's are redis-a, …,
	// sentinel-1, …; nginx and the harness reach everything directly.
	Network bool
	// Cluster, when 3 or more, runs Redis as a Redis Cluster of that many
	// masters (no replicas, appendonly as above), and the api and workers on
	// it (REDIS_CLUSTER=true). Not with Sentinel or Network.
	Cluster int
	// Log receives progress lines; nil is silent.
	Log func(format string, args ...any)
}

// Stack is a flashsale deployment of real processes on this machine:
// redis-server, mariadbd, api processes behind nginx, workers.
type Stack struct {
	Dir        string // binaries, configs and every process's log
	URL        string // where clients go: nginx, or the only api
	AdminToken string
	JWTSecret  string
	// WebhookSecret signs the simulated payment provider's webhooks
	// (SIMULATED_WEBHOOK_SECRET): the apis' own confirmations, and a
	// driver's late payments and replays (paysim.Provider.Deliver).
	WebhookSecret string
	RedisURL      string // the server, or with Sentinel the sentinels (REDIS_URL's form)
	// RedisMaster is the sentinels' name of the primary (REDIS_SENTINEL_MASTER),
	// "" without Sentinel.
	RedisMaster string
	MySQLDSN    string
	APIs        []*Proc
	Workers     []*Proc
	Nginx       *Proc
	// Cluster is the Redis Cluster with StackOptions.Cluster, else nil;
	// RedisURL is then its REDIS_URL form.
	Cluster *testenv.RedisCluster
	// Net is the network with StackOptions.Network, else nil. RedisURL and
	// MySQLDSN are the harness's (direct) then; the processes are given
	// the servers' names. A harness client of the sentinels dials with
	// Net.Dial, since they answer names.
	Net *testenv.Network

	apiBin, workerBin string
	env               []string
	redis             *testenv.RedisServer
	sentinel          *testenv.SentinelGroup
	mysql             *testenv.MariaDB
}

// StartStack builds the binaries of the module at root and starts a stack.
// Close stops it and removes everything it made.
func StartStack(ctx context.Context, root string, o StackOptions) (_ *Stack, err error) {
	if o.APIs <= 0 {
		o.APIs = 1
	}
	if o.RedisFsync == "" {
		o.RedisFsync = "everysec"
	}
	say := o.Log
	if say == nil {
		say = func(string, ...any) {}
	}
	dir, err := os.MkdirTemp("", "flashsale-loadtest-")
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, AdminToken: randomHex(16), JWTSecret: randomHex(32), WebhookSecret: randomHex(32)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	say("building cmd/api and cmd/worker")
	if s.apiBin, s.workerBin, err = Build(ctx, root, dir); err != nil {
		return nil, err
	}
	rcfg := testenv.RedisConfig{AppendOnly: true, AppendFsync: o.RedisFsync}
	if o.Network {
		say("starting toxiproxy-server: every link through a proxy of its own")
		if s.Net, err = testenv.LaunchNetwork(dir); err != nil {
			return nil, err
		}
		rcfg.Network, rcfg.Host = s.Net, "redis-a"
	}
	procRedisURL := ""
	switch {
	case o.Cluster > 0 && (o.Sentinel || o.Network):
		return nil, errors.New("loadtest: a cluster stack has no Sentinel nor network of proxies")
	case o.Cluster > 0:
		say("starting a Redis Cluster of %d masters (appendonly, appendfsync %s) and mariadbd", o.Cluster, o.RedisFsync)
		if s.Cluster, err = testenv.LaunchRedisCluster(o.Cluster, rcfg); err != nil {
			return nil, err
		}
		s.RedisURL = s.Cluster.URL()
		procRedisURL = s.RedisURL
		o.Env = append([]string{"REDIS_CLUSTER=true"}, o.Env...)
	case o.Sentinel:
		say("starting a redis-server primary and a replica (appendonly, appendfsync %s), three sentinels, and mariadbd", o.RedisFsync)
		if s.sentinel, err = testenv.LaunchSentinelGroup(rcfg, 1, 3); err != nil {
			return nil, err
		}
		s.RedisURL, s.RedisMaster = s.sentinel.URL(), s.sentinel.MasterName
		procRedisURL = s.RedisURL
		if s.Net != nil {
			s.RedisURL = directSentinelURL(s.sentinel)
		}
		o.Env = append([]string{"REDIS_SENTINEL_MASTER=" + s.RedisMaster, "REDIS_ACK_REPLICAS=1"}, o.Env...)
	default:
		say("starting redis-server (appendonly, appendfsync %s) and mariadbd", o.RedisFsync)
		if s.redis, err = testenv.LaunchRedis(rcfg); err != nil {
			return nil, err
		}
		s.RedisURL, procRedisURL = s.redis.URL(), s.redis.URL()
		if s.Net != nil {
			procRedisURL = "redis://" + s.Net.Addr("redis-a") + "/0"
		}
	}
	if s.mysql, err = testenv.LaunchMariaDB(); err != nil {
		return nil, err
	}
	cfg := s.mysql.Config()
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE flashsale CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	admin.Close()
	if err != nil {
		return nil, err
	}
	cfg.DBName = "flashsale"
	s.MySQLDSN = cfg.FormatDSN()
	procDSN := s.MySQLDSN
	if s.Net != nil {
		_, port, _ := net.SplitHostPort(cfg.Addr)
		p, _ := strconv.Atoi(port)
		if err := s.Net.AddServer("mysql", p); err != nil {
			return nil, err
		}
		cfg.Addr = s.Net.Addr("mysql")
		procDSN = cfg.FormatDSN()
	}

	s.env = append([]string{
		"REDIS_URL=" + procRedisURL, "MYSQL_DSN=" + procDSN, "JWT_SECRET=" + s.JWTSecret,
		"ADMIN_TOKEN=" + s.AdminToken, "LOG_FORMAT=json", "LOG_LEVEL=warn", "TRUSTED_PROXIES=127.0.0.1",
		// No money moves in the kit: the simulated provider confirms each
		// pay in a webhook to its api. Its secret is the stack's, so a
		// driver (the soak) can send late payments and replays too.
		"PAYMENT_PROVIDER=simulated", "SIMULATED_WEBHOOK_SECRET=" + s.WebhookSecret,
		// Every process's refunds in one file: a driver counts a payment's
		// refunds across them (paysim.RefundLog).
		"SIMULATED_REFUND_LOG=" + s.RefundLog(),
	}, o.Env...)
	say("starting %d api processes", o.APIs)
	for i := range o.APIs {
		var env []string
		if i == 0 {
			env = o.APIEnv
		}
		p, err := s.StartAPI(fmt.Sprintf("api%d", i+1), env...)
		if err != nil {
			return nil, err
		}
		s.APIs = append(s.APIs, p)
	}
	for _, p := range s.APIs {
		if err := p.WaitHTTP("http://"+p.Addr+"/readyz", 90*time.Second); err != nil {
			return nil, err
		}
	}
	say("starting %d workers", o.Workers)
	for i := range o.Workers {
		var env []string
		if i == 0 {
			env = o.WorkerEnv
		}
		p, err := s.StartWorker(fmt.Sprintf("worker%d", i+1), env...)
		if err != nil {
			return nil, err
		}
		s.Workers = append(s.Workers, p)
	}
	s.URL = "http://" + s.APIs[0].Addr
	if o.APIs > 1 || o.Nginx {
		say("starting nginx in front of the api processes")
		if s.Nginx, err = s.startNginx(); err != nil {
			return nil, err
		}
		s.URL = "http://" + s.Nginx.Addr
	}
	return s, nil
}

// StartAPI starts one more api process of the stack, with extra env; wait
// for it with p.WaitHTTP("http://"+p.Addr+"/readyz", …).
func (s *Stack) StartAPI(name string, env ...string) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	return s.startProc(name, addr, s.apiBin, append(append([]string{"HTTP_ADDR=" + addr}, s.env...), env...))
}

// startProc starts an api or a worker: on the network, as its host.
func (s *Stack) startProc(name, addr, bin string, env []string) (*Proc, error) {
	p := &Proc{Name: name, Addr: addr, log: filepath.Join(s.Dir, name+".log"), bin: bin, env: env}
	if s.Net != nil {
		if err := s.Net.AddHost(name); err != nil {
			return nil, err
		}
		p.net = s.Net
	}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// StartWorker starts one more worker and waits until it is ready.
func (s *Stack) StartWorker(name string, env ...string) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	p, err := s.startProc(name, addr, s.workerBin, append(append([]string{"WORKER_HTTP_ADDR=" + addr}, s.env...), env...))
	if err != nil {
		return nil, err
	}
	return p, p.WaitHTTP("http://"+addr+"/readyz", 60*time.Second)
}

// nginxConf is the classic three-backend setup: one upstream, keepalive
// connections to it, the client address passed on.
var nginxConf = template.Must(template.New("nginx").Parse(`# written by internal/loadtest
daemon off;
worker_processes 2;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/nginx-error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path {{.Dir}}/nginx-body;
    proxy_temp_path {{.Dir}}/nginx-proxy;
    fastcgi_temp_path {{.Dir}}/nginx-fastcgi;
    uwsgi_temp_path {{.Dir}}/nginx-uwsgi;
    scgi_temp_path {{.Dir}}/nginx-scgi;
    upstream api {
{{- range .Backends}}
        server {{.}} max_fails=0;
{{- end}}
        keepalive 512;
    }
    server {
        listen {{.Addr}} backlog=4096;
        keepalive_requests 1000000;
        location / {
            proxy_pass http://api;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Real-IP $remote_addr;
        }
    }
}
`))

func (s *Stack) startNginx() (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	var backends []string
	for _, p := range s.APIs {
		backends = append(backends, p.Addr)
	}
	conf := filepath.Join(s.Dir, "nginx.conf")
	f, err := os.Create(conf)
	if err != nil {
		return nil, err
	}
	err = nginxConf.Execute(f, map[string]any{"Dir": s.Dir, "Addr": addr, "Backends": backends})
	f.Close()
	if err != nil {
		return nil, err
	}
	bin, err := lookNginx()
	if err != nil {
		return nil, err
	}
	p, err := StartProc(s.Dir, "nginx", addr, bin, []string{"-p", s.Dir, "-c", conf, "-e", filepath.Join(s.Dir, "nginx-error.log")}, nil)
	if err != nil {
		return nil, err
	}
	return p, p.WaitHTTP("http://"+addr+"/healthz", 10*time.Second)
}

func lookNginx() (string, error) {
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("nginx not found: install it (apt-get install nginx-light; make test does)")
}

// Close stops every process and removes the stack's files.
func (s *Stack) Close() {
	if s.Nginx != nil {
		s.Nginx.Stop(5 * time.Second)
	}
	for _, p := range append(append([]*Proc{}, s.APIs...), s.Workers...) {
		p.Stop(10 * time.Second)
	}
	if s.redis != nil {
		s.redis.Close()
	}
	if s.sentinel != nil {
		s.sentinel.Close()
	}
	if s.Cluster != nil {
		s.Cluster.Close()
	}
	if s.mysql != nil {
		s.mysql.Close()
	}
	if s.Net != nil {
		s.Net.Close()
	}
	if os.Getenv("LOADTEST_KEEP") == "" {
		_ = os.RemoveAll(s.Dir)
	}
}

// Logs names the processes' log files (kept with LOADTEST_KEEP=1).
func (s *Stack) Logs() string {
	var names []string
	for _, p := range append(append(append([]*Proc{}, s.APIs...), s.Workers...), s.Nginx) {
		if p != nil {
			names = append(names, p.log)
		}
	}
	return strings.Join(names, " ")
}

// RedisPID is the redis-server's process id, for its CPU time
// (ProcessCPU): the one server of a stack without Sentinel or Cluster.
func (s *Stack) RedisPID() (int, error) {
	if s.redis == nil {
		return 0, errors.New("loadtest: no single redis-server in this stack (Sentinel or Cluster)")
	}
	if pid := s.redis.PID(); pid > 0 {
		return pid, nil
	}
	return 0, errors.New("loadtest: redis-server is not running")
}

// MySQLPID is mariadbd's process id, for its CPU time (ProcessCPU).
func (s *Stack) MySQLPID() (int, error) {
	if s.mysql == nil || s.mysql.PID() == 0 {
		return 0, errors.New("loadtest: mariadbd is not running")
	}
	return s.mysql.PID(), nil
}

// directSentinelURL is g.URL() with the sentinels' own addresses, for the
// harness, which is no host of the network.
func directSentinelURL(g *testenv.SentinelGroup) string {
	addrs := g.SentinelAddrs()
	return "redis://" + addrs[0] + "/0?addr=" + strings.Join(addrs[1:], "&addr=")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RefundLog is the file every api's and worker's simulated provider
// appends its refunds to (SIMULATED_REFUND_LOG): paysim.RefundLog reads
// a payment's refunds from it, across the processes.
func (s *Stack) RefundLog() string { return filepath.Join(s.Dir, "refunds.log") }
