package deploy

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// sentinelConf is a Sentinel configuration file: one directive a line, its
// words split on blanks (what the compose file writes needs no quoting).
type sentinelConf struct {
	path, text string
	lines      [][]string
}

func readSentinelConf(t *testing.T, path string) sentinelConf {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := sentinelConf{path: path, text: string(raw)}
	for _, line := range strings.Split(c.text, "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			for i := range f {
				f[i] = strings.Trim(f[i], `"`)
			}
			c.lines = append(c.lines, f)
		}
	}
	return c
}

// get returns the arguments of the first directive that starts with words
// ("port"; "sentinel", "monitor").
func (c sentinelConf) get(words ...string) ([]string, bool) {
	for _, l := range c.lines {
		if len(l) >= len(words) && slices.Equal(l[:len(words)], words) {
			return l[len(words):], true
		}
	}
	return nil, false
}

// entrypointStub stands in for the redis image's docker-entrypoint.sh (and,
// should a command skip it, for redis-server and redis-sentinel): it writes
// the program it stands for and its arguments, one a line, to $ARGV_FILE
// instead of running anything.
const entrypointStub = `#!/bin/sh
{ basename "$0"; for a in "$@"; do printf '%s\n' "$a"; done; } >"$ARGV_FILE"
`

// writtenSentinelConf runs the sentinel service's command the way its
// container does, on this machine: the shell script, in dir standing for
// the service's volume (the image's working directory), and the image's
// docker-entrypoint.sh replaced by a stub that records what the script hands
// over to. It returns the configuration file the script wrote and
// redis-server is started on, and that program's arguments. Run again on
// the same dir, it is the sentinel restarting.
func writtenSentinelConf(t *testing.T, c *compose, name, dir string) (sentinelConf, []string) {
	t.Helper()
	s := c.Services[name]
	if len(s.Command) != 3 || (s.Command[0] != "sh" && s.Command[0] != "/bin/sh") || s.Command[1] != "-c" {
		t.Fatalf("%s: command %q; want [sh -c <script>] writing the configuration and starting redis-server --sentinel", name, s.Command)
	}
	vol, ok := namedVolumeAt(t, c, s, "/data")
	if !ok {
		t.Fatalf("%s: no named volume at /data for its configuration and state: %v", name, s.Volumes)
	}
	// `docker-compose config` prints $ as $$, as the file must spell it.
	script := strings.ReplaceAll(s.Command[2], "$$", "$")
	// The script runs here, as whoever runs the tests: it may touch its
	// volume only.
	volPath := regexp.MustCompile(`(^|[^\w.-])/data\b`)
	for _, p := range regexp.MustCompile(`(^|[\s"'=<>:])(/[\w./-]*)`).FindAllStringSubmatch(script, -1) {
		if p[2] != "/data" && !strings.HasPrefix(p[2], "/data/") && p[2] != "/dev/null" {
			t.Fatalf("%s: the command names %s, outside its volume (/data): this test runs the script on this machine "+
				"and will not let it write there", name, p[2])
		}
	}
	if !volPath.MatchString(script) {
		t.Fatalf("%s: the command writes nothing into its volume %s at /data: what the sentinel learns is lost with the container", name, vol)
	}
	script = volPath.ReplaceAllString(script, "${1}"+strings.ReplaceAll(dir, "$", "$$"))

	bin := t.TempDir()
	for _, prog := range []string{"docker-entrypoint.sh", "redis-server", "redis-sentinel"} {
		if err := os.WriteFile(filepath.Join(bin, prog), []byte(entrypointStub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argvFile := filepath.Join(bin, "argv")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "ARGV_FILE=" + argvFile, "HOME=" + dir}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: its command, run with sh: %v\n%s\nscript:\n%s", name, err, out, script)
	}
	raw, err := os.ReadFile(argvFile)
	if err != nil {
		t.Fatalf("%s: its command never hands over to the image's docker-entrypoint.sh: %v", name, err)
	}
	argv := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if argv[0] != "docker-entrypoint.sh" {
		t.Fatalf("%s: its command runs %s itself; hand over to docker-entrypoint.sh, which drops root (%q)", name, argv[0], argv)
	}
	argv = argv[1:]
	if len(argv) < 3 || argv[0] != "redis-server" || !slices.Contains(argv, "--sentinel") {
		t.Fatalf("%s: its command starts %q; want redis-server <conf> --sentinel", name, argv)
	}
	conf := argv[1]
	if !filepath.IsAbs(conf) {
		conf = filepath.Join(dir, conf)
	}
	if rel, err := filepath.Rel(dir, conf); err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("%s: the sentinel's configuration %s is not in its volume: Sentinel rewrites it with what it learns", name, argv[1])
	}
	return readSentinelConf(t, conf), argv
}

// The configuration every sentinel writes, run by the real redis-server
// --sentinel against a throwaway primary and replicas (internal/testenv),
// the compose hostnames and ports swapped for theirs (the primary's host
// stays a hostname, localhost, where that names 127.0.0.1 alone, so that
// resolve-hostnames and announce-hostnames are exercised): the sentinels start,
// find the replicas and each other, pass their compose health check (as do
// the Redis servers theirs), and with the file's timing fail the primary
// over to the replica when it dies. A sentinel restarted after that keeps
// what it learned: its command does not write over its configuration.
func TestCompose_sentinelsRunTheirConfiguration(t *testing.T) {
	c := loadCompose(t, testSecrets)
	tp := roles(t, c)
	if len(tp.sentinels) == 0 || len(tp.replicas) == 0 {
		t.Fatalf("sentinels %v, replicas %v: nothing to run", tp.sentinels, tp.replicas)
	}

	// The servers, by service name.
	servers := map[string]*testenv.RedisServer{tp.redis: testenv.StartRedisWith(t, testenv.RedisConfig{AppendOnly: true})}
	primary := servers[tp.redis]
	for _, name := range tp.replicas {
		servers[name] = testenv.StartRedisWith(t, testenv.RedisConfig{AppendOnly: true, ReplicaOf: primary.Addr()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testenv.WaitReplicasOnline(ctx, primary.Addr(), len(tp.replicas)); err != nil {
		t.Fatal(err)
	}
	for name, srv := range servers {
		runHealthcheck(t, c, name, redisPort(c.Services[name].Command), srv.Addr())
	}

	host, byName := loopbackHost(t)
	var master string
	var sentinels []*sentinelProc
	for _, name := range tp.sentinels {
		dir := t.TempDir()
		conf, argv := writtenSentinelConf(t, c, name, dir)
		mon, _ := conf.get("sentinel", "monitor")
		if len(mon) != 4 || servers[mon[1]] == nil {
			t.Fatalf("%s: monitors %v, not a Redis service of the file", name, mon)
		}
		master = mon[0]
		sp := &sentinelProc{t: t, name: name, conf: conf.path, argv: argv, port: freePort(t)}
		_, pport, _ := net.SplitHostPort(servers[mon[1]].Addr())
		localizeSentinelConf(t, conf, sp.port, host, pport)
		sp.start()
		sentinels = append(sentinels, sp)
	}
	for _, sp := range sentinels {
		sp.waitFor(ctx, "to know the primary, its replicas and the other sentinels", func(sc *redis.SentinelClient) bool {
			m, err := sc.Master(ctx, master).Result()
			return err == nil && m["flags"] == "master" && m["num-slaves"] == strconv.Itoa(len(tp.replicas)) &&
				m["num-other-sentinels"] == strconv.Itoa(len(sentinels)-1)
		})
		conf := readSentinelConf(t, sp.conf)
		if _, ok := conf.get("sentinel", "myid"); !ok {
			t.Errorf("%s: did not rewrite %s with what it learned:\n%s", sp.name, sp.conf, conf.text)
		}
		runHealthcheck(t, c, sp.name, confPort(t, c, sp.name), sp.addr())
		// announce-hostnames: clients are handed the primary's name, as
		// configured, not the address it resolved to.
		sc := redis.NewSentinelClient(&redis.Options{Addr: sp.addr()})
		addr, err := sc.GetMasterAddrByName(ctx, master).Result()
		sc.Close()
		if byName && (err != nil || len(addr) != 2 || addr[0] != host) {
			t.Errorf("%s hands out the primary as %v, %v; want it by name, %q", sp.name, addr, err, host)
		}
	}

	// A write the replicas hold, then the primary dies.
	rdb := primary.Client(t)
	if err := rdb.Set(ctx, "deploy-test", "held", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Do(ctx, "WAIT", len(tp.replicas), 5000).Int(); err != nil || n != len(tp.replicas) {
		t.Fatalf("WAIT %d: %d, %v", len(tp.replicas), n, err)
	}
	oldAddr := primary.Addr()
	killed := time.Now()
	primary.Kill()
	var newAddr, newName string
	for _, sp := range sentinels {
		sp.waitFor(ctx, "to name a new primary", func(sc *redis.SentinelClient) bool {
			addr, err := sc.GetMasterAddrByName(ctx, master).Result()
			if err != nil || len(addr) != 2 || loopbackAddr(addr[0], addr[1]) == oldAddr {
				return false
			}
			if got := loopbackAddr(addr[0], addr[1]); newAddr == "" {
				newAddr = got
			} else if got != newAddr {
				t.Fatalf("%s names %s the primary, another sentinel %s", sp.name, got, newAddr)
			}
			return true
		})
	}
	t.Logf("the sentinels named %s the primary %v after %s died", newAddr, time.Since(killed).Round(100*time.Millisecond), oldAddr)
	for name, srv := range servers {
		if srv.Addr() == newAddr {
			newName = name
		}
	}
	if newName == "" || newName == tp.redis {
		t.Fatalf("the new primary %s is none of the replicas", newAddr)
	}
	promoted := servers[newName].Client(t)
	waitUntil(t, ctx, newName+" to answer as the primary", func() bool {
		role, err := promoted.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	})
	if v, err := promoted.Get(ctx, "deploy-test").Result(); err != nil || v != "held" {
		t.Errorf("%s, promoted: the write the replicas held is %q, %v", newName, v, err)
	}
	runHealthcheck(t, c, newName, redisPort(c.Services[newName].Command), newAddr)

	// A sentinel restarted: its command runs again on its volume and must
	// leave the rewritten configuration, which names the new primary.
	sp := sentinels[0]
	sp.kill()
	dir := filepath.Dir(sp.conf)
	conf, argv := writtenSentinelConf(t, c, sp.name, dir)
	if mon, _ := conf.get("sentinel", "monitor"); len(mon) != 4 || loopbackAddr(mon[1], mon[2]) != newAddr {
		t.Fatalf("%s, restarted: its command wrote a configuration monitoring %v, not the primary it had learned, %s:\n%s",
			sp.name, mon, newAddr, conf.text)
	}
	sp.argv = argv
	sp.start()
	sp.waitFor(ctx, "to name the new primary after its restart", func(sc *redis.SentinelClient) bool {
		addr, err := sc.GetMasterAddrByName(ctx, master).Result()
		return err == nil && len(addr) == 2 && loopbackAddr(addr[0], addr[1]) == newAddr
	})
}

// loopbackHost is how the local sentinels are told to reach the primary:
// "localhost" where it names 127.0.0.1 alone (and so resolves, for
// redis-server too, to where the throwaway servers listen), else 127.0.0.1.
func loopbackHost(t *testing.T) (host string, byName bool) {
	if addrs, err := net.LookupHost("localhost"); err == nil && slices.Equal(addrs, []string{"127.0.0.1"}) {
		return "localhost", true
	}
	t.Log("localhost does not name 127.0.0.1 alone: the local sentinels get IP addresses, and resolve-hostnames " +
		"and announce-hostnames are checked only in the file")
	return "127.0.0.1", false
}

// loopbackAddr is host:port with localhost as 127.0.0.1.
func loopbackAddr(host, port string) string {
	if host == "localhost" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// localizeSentinelConf points a configuration written for the compose
// network at this machine: the sentinel's port, the monitored primary's
// address, and loopback only.
func localizeSentinelConf(t *testing.T, conf sentinelConf, port int, host, pport string) {
	t.Helper()
	var b strings.Builder
	for _, l := range conf.lines {
		switch {
		case l[0] == "port":
			l = []string{"port", strconv.Itoa(port)}
		case len(l) == 6 && l[0] == "sentinel" && l[1] == "monitor":
			l = []string{"sentinel", "monitor", l[2], host, pport, l[5]}
		}
		b.WriteString(strings.Join(l, " ") + "\n")
	}
	b.WriteString("bind 127.0.0.1\n")
	if err := os.WriteFile(conf.path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// confPort is the port the sentinel service's configuration gives it.
func confPort(t *testing.T, c *compose, name string) string {
	t.Helper()
	conf, _ := writtenSentinelConf(t, c, name, t.TempDir())
	p, ok := conf.get("port")
	if !ok || len(p) != 1 {
		t.Fatalf("%s: no port in its configuration:\n%s", name, conf.text)
	}
	return p[0]
}

// runHealthcheck runs the service's CMD-SHELL health check here against the
// server at addr, which stands for the service's port; it must pass.
func runHealthcheck(t *testing.T, c *compose, name, port, addr string) {
	t.Helper()
	h := c.Services[name].Healthcheck
	if h == nil || len(h.Test) != 2 || h.Test[0] != "CMD-SHELL" {
		t.Fatalf("%s: healthcheck %+v; want a CMD-SHELL test to run here", name, h)
	}
	_, local, _ := net.SplitHostPort(addr)
	flag := regexp.MustCompile(`-p ` + regexp.QuoteMeta(port) + `\b`)
	if !flag.MatchString(h.Test[1]) {
		t.Fatalf("%s: healthcheck %q does not name its port (-p %s)", name, h.Test[1], port)
	}
	script := flag.ReplaceAllLiteralString(h.Test[1], "-h 127.0.0.1 -p "+local)
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Errorf("%s: its healthcheck, run against %s, fails: %v %s\n%s", name, addr, err, out, script)
	}
}

// sentinelProc is a redis-server --sentinel process this test started.
type sentinelProc struct {
	t          *testing.T
	name, conf string
	argv       []string // redis-server's arguments as the container gets them
	port       int

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited

	mu  sync.Mutex // guards log, which the process's output goes to
	log bytes.Buffer
}

func (p *sentinelProc) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// start runs redis-server with the container's arguments, the configuration
// being the local copy in its volume's stand-in.
func (p *sentinelProc) start() {
	p.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		p.t.Fatalf("redis-server: %v", err)
	}
	args := slices.Clone(p.argv[1:])
	args[0] = p.conf
	cmd := exec.Command(bin, args...)
	cmd.Dir = filepath.Dir(p.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = &lockedWriter{&p.mu, &p.log}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("%s: start redis-server %q: %v", p.name, args, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.t.Cleanup(p.kill)
}

func (p *sentinelProc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// waitFor polls the sentinel until ok says yes, failing the test with its
// log if it does not within ctx.
func (p *sentinelProc) waitFor(ctx context.Context, what string, ok func(*redis.SentinelClient) bool) {
	p.t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer sc.Close()
	for !ok(sc) {
		select {
		case <-p.done:
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("%s exited waiting %s:\n%s", p.name, what, p.log.String())
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("%s: still waiting %s: %v\n%s", p.name, what, ctx.Err(), p.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func waitUntil(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
