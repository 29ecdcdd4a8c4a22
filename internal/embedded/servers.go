package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// serverStack is Servers mode: redis-server and mariadbd as child
// processes, their files in one temp directory.
type serverStack struct {
	dir   string
	procs []*child
}

// serverBinaries are what Servers mode runs.
var serverBinaries = []string{"redis-server", "mariadbd", "mariadb-install-db"}

// missingServers names the binaries of serverBinaries that are not
// installed.
func missingServers() []string {
	var missing []string
	for _, b := range serverBinaries {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// lookPath finds a binary on PATH or where Debian puts servers (mariadbd
// is in /usr/sbin, not on a user's PATH).
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// dirPrefix names Servers mode's temp directories: the pid after it says
// whose (sweepStale).
const dirPrefix = "flashsale-embedded-"

// startServers runs redis-server and mariadbd (a fresh datadir, a
// database) on free loopback ports, tuned for data that is thrown away:
// MariaDB writes its log to disk without an fsync at each commit
// (innodb_flush_log_at_trx_commit=0) and without the doublewrite buffer,
// and Redis neither snapshots nor logs. A crash of the machine loses what
// the process's exit would lose anyway. Both die with this process
// (Pdeathsig), even if it is killed -9.
func startServers(log *slog.Logger) (*Stack, error) {
	sweepStale()
	dir, err := os.MkdirTemp("", dirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	s := &serverStack{dir: dir}
	st := &Stack{Mode: Servers, Dir: dir, servers: s}
	started := time.Now()
	log.Info("embedded mode: starting redis-server and mariadbd", "dir", dir)
	if st.RedisURL, err = s.startRedis(); err != nil {
		s.close()
		return nil, err
	}
	if st.MySQLDSN, err = s.startMariaDB(); err != nil {
		s.close()
		return nil, err
	}
	log.Info("embedded mode: redis-server and mariadbd are up", "took", time.Since(started).Round(time.Millisecond))
	return st, nil
}

func (s *serverStack) startRedis() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	bin, _ := lookPath("redis-server")
	p, err := startChild("redis-server", exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"),
		"--protected-mode", "no", "--daemonize", "no"))
	if err != nil {
		return "", err
	}
	s.procs = append(s.procs, p)
	url := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	err = p.waitReady(30*time.Second, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return "", fmt.Errorf("embedded redis-server: %w\n%s", err, log)
	}
	return url, nil
}

func (s *serverStack) startMariaDB() (string, error) {
	data, tmp := filepath.Join(s.dir, "data"), filepath.Join(s.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", err
	}
	common := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp}
	if os.Geteuid() == 0 {
		common = append(common, "--user=root") // mariadbd refuses to run as root otherwise
	}
	install, _ := lookPath("mariadb-install-db")
	if out, err := exec.Command(install, append(common, "--auth-root-authentication-method=normal", "--skip-test-db")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("embedded mariadb-install-db: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	bin, _ := lookPath("mariadbd")
	errLog := filepath.Join(s.dir, "mariadb.log")
	p, err := startChild("mariadbd", exec.Command(bin, append(common,
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(s.dir, "mysqld.sock"), "--pid-file="+filepath.Join(s.dir, "mysqld.pid"),
		"--log-error="+errLog,
		"--innodb-buffer-pool-size=256M",
		"--innodb-log-file-size=128M",
		"--innodb-flush-log-at-trx-commit=0", // the data is thrown away at exit: no fsync per commit
		"--innodb-doublewrite=0",
		"--skip-log-bin",
		"--max-connections=500",
	)...))
	if err != nil {
		return "", err
	}
	s.procs = append(s.procs, p)
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.ParseTime = "root", "tcp", "127.0.0.1:"+strconv.Itoa(port), true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", err
	}
	defer db.Close()
	err = p.waitReady(60*time.Second, func(ctx context.Context) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+DatabaseName+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		return err
	})
	if err != nil {
		log, _ := os.ReadFile(errLog)
		return "", fmt.Errorf("embedded mariadbd: %w\n%s", err, log)
	}
	cfg.DBName = DatabaseName
	return cfg.FormatDSN(), nil
}

// child is a server process this one started.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startChild starts cmd, to die with this process: Pdeathsig follows the
// thread that started the child, and Go may end an idle thread, so that
// thread stays locked to a goroutine that waits for the child
// (golang/go#27505).
func startChild(name string, cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("embedded %s: %w", name, err)
			close(c.exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// waitReady calls ready until it succeeds, the child exits or timeout
// passes.
func (c *child) waitReady(timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return errors.New("exited during start-up")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the child and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// close kills the servers (what they hold is thrown away: no clean
// shutdown to wait for) and removes their files.
func (s *serverStack) close() error {
	for _, p := range s.procs {
		p.kill()
	}
	s.procs = nil
	return os.RemoveAll(s.dir)
}

// sweepStale removes the directories of Servers mode runs whose process
// is gone (killed: its servers died with it through Pdeathsig, their
// files did not).
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(d), dirPrefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
