// Package testenv starts the real servers tests run against: throwaway
// redis-server processes that tests can stop, kill, pause and restart, and
// MariaDB databases created for one test and dropped after it. It also
// re-executes the test binary as separate OS processes for multi-process
// tests.
//
// Nothing here touches servers or data the tests did not create: Redis
// servers listen on fresh loopback ports with their own temp dirs, and MySQL
// databases get unique fstest_ names.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process owned by one test.
type RedisServer struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	config RedisConfig

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// RedisConfig tunes a RedisServer. The zero value is an in-memory server.
type RedisConfig struct {
	// AppendOnly turns on the append-only file, so data survives Kill and
	// Restart.
	AppendOnly bool
	// AppendFsync is appendfsync with AppendOnly: "always" (the default:
	// nothing acknowledged is lost to a kill), "everysec" or "no".
	AppendFsync string
	// Cluster starts the server in cluster mode (StartRedisCluster joins
	// several into one cluster).
	Cluster bool
	// ReplicaOf, "host:port", starts the server as a replica of that primary.
	ReplicaOf string
	// Sentinel starts a Sentinel (redis-server --sentinel) watching the
	// primary at MasterAddr under MasterName, agreeing on failure with
	// Quorum sentinels (StartSentinelGroup).
	Sentinel   bool
	MasterName string
	MasterAddr string
	Quorum     int
	// Network, with Host, runs the server as that host of the network (its
	// own /etc/hosts, every peer through its own link) and makes it known
	// there by that name: it announces it (replica-announce-ip; a sentinel
	// resolves and announces names), and the network's hosts reach it by
	// it. ReplicaOf and MasterAddr then name a server of the network
	// ("redis-a:6390").
	Network *Network
	Host    string
}

// StartRedis starts a redis-server on a free loopback port. It is killed when
// the test ends. A missing redis-server binary fails the test with a message
// saying how to install it.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	return StartRedisWith(t, RedisConfig{})
}

// StartRedisWith is StartRedis with a config.
func StartRedisWith(t testing.TB, cfg RedisConfig) *RedisServer {
	t.Helper()
	bin := requireBinary(t, "redis-server", "redis-server")
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir(), config: cfg}
	var err error
	for range 5 { // a free port can be taken between probe and bind: retry
		s.port, err = FreePort()
		if err != nil {
			continue
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	t.Cleanup(s.cleanup)
	return s
}

// StartRedisN starts n independent servers (Redlock tests use five).
func StartRedisN(t testing.TB, n int) []*RedisServer {
	t.Helper()
	out := make([]*RedisServer, n)
	for i := range out {
		out[i] = StartRedis(t)
	}
	return out
}

// Addr is host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is a redis:// URL for database 0.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Client returns a go-redis client for the server, closed when the test ends.
// Context deadlines bound its calls, and its timeouts are short so tests that
// pause the server do not hang.
func (s *RedisServer) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(ClientOptions(s.Addr()))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientOptions are the go-redis options tests use for addr.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		MaxRetries:            -1, // a test that kills the server wants to see the error
		PoolSize:              64,
	}
}

func (s *RedisServer) args() []string {
	if s.config.Sentinel {
		return []string{s.sentinelConf(), "--sentinel"}
	}
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--maxclients", "4000",
		// A replica's full sync starts at once (the default waits 5 s for
		// more replicas to share it): tests restart replicas and primaries.
		"--repl-diskless-sync-delay", "0",
	}
	if s.config.Cluster {
		args = append(args, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "5000")
	}
	if s.config.Network != nil {
		args = append(args, "--replica-announce-ip", s.config.Host)
	}
	if s.config.ReplicaOf != "" {
		host, port, _ := net.SplitHostPort(s.config.ReplicaOf)
		args = append(args, "--replicaof", host, port)
	}
	if s.config.AppendOnly {
		fsync := s.config.AppendFsync
		if fsync == "" {
			fsync = "always"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	return args
}

func (s *RedisServer) start() error {
	cmd := exec.Command(s.bin, s.args()...)
	if n := s.config.Network; n != nil {
		if err := n.AddHost(s.config.Host); err != nil {
			return err
		}
		cmd = n.Command(s.config.Host, s.bin, s.args()...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := waitReady(s.Addr(), exited, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("%w; redis.log:\n%s", err, log)
	}
	if n := s.config.Network; n != nil {
		return n.AddServer(s.config.Host, s.port)
	}
	return nil
}

// waitReady polls PING until the server answers, it exits, or timeout.
func waitReady(addr string, exited <-chan struct{}, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during start-up")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server not ready after %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *RedisServer) signal(sig os.Signal) {
	if s.t != nil {
		s.t.Helper()
	}
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.fail("testenv: redis-server on %s is not running", s.Addr())
		return
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.fail("testenv: signal %v to redis-server: %v", sig, err)
	}
}

// fail reports a fault-injection mistake: to the test, or for a server
// started outside one (LaunchRedis) as a panic, since the caller's
// sequence of faults cannot go on.
func (s *RedisServer) fail(format string, args ...any) {
	if s.t != nil {
		s.t.Helper()
		s.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

// wait blocks until the process has exited.
func (s *RedisServer) wait() {
	s.mu.Lock()
	exited := s.exited
	s.cmd = nil
	s.mu.Unlock()
	<-exited
}

// Stop shuts the server down cleanly (SIGTERM).
func (s *RedisServer) Stop() {
	s.signal(syscall.SIGTERM)
	s.wait()
}

// Kill kills the server with SIGKILL: no goodbye, no final write.
func (s *RedisServer) Kill() {
	s.signal(syscall.SIGKILL)
	s.wait()
}

// PID is the running server's process id, 0 when it is not running (after
// Stop or Kill). With a Network it is the command that runs the server as
// its host. A benchmark reads the server's CPU time by it (/proc/<pid>/stat).
func (s *RedisServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing answers.
func (s *RedisServer) Pause() {
	s.signal(syscall.SIGSTOP)
}

// Resume continues a paused server (SIGCONT).
func (s *RedisServer) Resume() {
	s.signal(syscall.SIGCONT)
}

// Restart starts the server again on the same port and directory after Stop
// or Kill. With AppendOnly, its data is back.
func (s *RedisServer) Restart() {
	var err error
	for range 50 { // the old socket may linger for a moment
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.fail("testenv: restart redis-server on %s: %v", s.Addr(), err)
}

// RestartReplicaOf restarts a stopped or killed server as a replica of the
// primary at addr (after a failover promoted another server).
func (s *RedisServer) RestartReplicaOf(addr string) {
	if n := s.config.Network; n != nil {
		addr = n.Named(addr) // the harness's address, the name its host calls it by
	}
	s.mu.Lock()
	s.config.ReplicaOf = addr
	s.mu.Unlock()
	s.Restart()
}

func (s *RedisServer) cleanup() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot act on SIGTERM
	_ = cmd.Process.Kill()
	<-exited
}

// FreePort returns a loopback port that was free a moment ago, for a
// process to bind next. It is drawn at random from below the kernel's
// ephemeral range (ip_local_port_range), not asked of the kernel with
// port 0: an ephemeral port handed back is the kernel's to give again, and
// between this check and the child's bind an outgoing connection of any
// test (to Redis, to MariaDB) could take it as its local port — a child
// then died with "bind: address already in use" (cmd/api's webhook test,
// a CI run of 2026-11-29). Below the range only another test's draw can
// collide, one chance in thousands.
//
// FreePort takes no testing.TB: the load-test kit's processes draw theirs
// with it too (loadtest.FreeAddr).
func FreePort() (int, error) {
	low, high := 10000, ephemeralLow()-1
	for range 50 {
		if high-low < 1000 {
			break // a range too narrow to draw from: the kernel's pick
		}
		p := low + rand.IntN(high-low+1)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768,
// Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1024 {
		return 32768
	}
	return n
}

// requireBinary fails the test when name is not on PATH, saying which Debian
// package provides it. A missing server is a failure, never a skip.
func requireBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := lookPath(name)
	if err != nil {
		t.Fatalf("testenv: %s not found on PATH (%v). Install it with `apt-get install %s`, "+
			"or run `make test`, which installs it.", name, err, pkg)
	}
	return p
}

// lookPath also searches the sbin directories, where Debian puts
// mariadbd, and Go's bin directory, where `go install` puts stripe-mock.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs := []string{"/usr/sbin", "/usr/local/sbin", "/sbin"}
	if gp := os.Getenv("GOPATH"); gp != "" {
		dirs = append(dirs, filepath.Join(gp, "bin"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// quietLogger drops go-redis's internal log lines ("connection pool: failed
// to dial …"), which fault-injection tests cause on purpose by the hundred.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }

// ScriptCalls is how many scripts (EVALSHA and EVAL) the server of rdb has
// run since it started or its stats were reset: a test counts the scripts
// an operation costs by reading it before and after.
func ScriptCalls(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	stats, err := CommandStats(context.Background(), rdb)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return stats["evalsha"].Calls + stats["eval"].Calls
}

// CommandStat is one command's line of INFO commandstats: how often it ran
// and the time Redis spent in it, in µs. A script's time includes the
// commands it called, which have lines (and times) of their own too.
type CommandStat struct {
	Calls, Usec int64
}

// CommandStats is the server's INFO commandstats by command name
// ("evalsha", "hmget", ...).
func CommandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]CommandStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	out := map[string]CommandStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		var st CommandStat
		for i, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			if i == 0 {
				k, v = "calls", field
			}
			if k != "calls" && k != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			if k == "calls" {
				st.Calls = n
			} else {
				st.Usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}

// Dir is the server's working directory (its logs, its data).
func (s *RedisServer) Dir() string { return s.dir }

// UsedMemory is the server's used_memory (INFO memory), in bytes: a test
// measures what data costs Redis by reading it before and after.
func UsedMemory(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatalf("testenv: INFO memory: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("testenv: used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("testenv: no used_memory in INFO memory")
	return 0
}
