package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLTestDSNEnv names the environment variable that points the tests at an
// existing MySQL/MariaDB server (go-sql-driver form, any database name is
// ignored). The tests only create and drop their own fstest_* databases there.
// Unset, each test package starts a throwaway mariadbd in a temp datadir.
const MySQLTestDSNEnv = "MYSQL_TEST_DSN"

var mysqlServer struct {
	once     sync.Once
	mainUsed bool
	cfg      *mysql.Config // server address and credentials, no database
	err      error
	stop     func()
}

// Main runs a package's tests, then stops the MariaDB server the package
// started, if any. Packages that call MySQL must use it in TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	mysqlServer.mainUsed = true
	code := m.Run()
	if mysqlServer.stop != nil {
		mysqlServer.stop()
	}
	os.Exit(code)
}

// MySQL creates a fresh, uniquely named database for this test and returns
// its DSN (go-sql-driver form, parseTime on). The database is dropped when the
// test ends.
func MySQL(t testing.TB) string {
	t.Helper()
	if !mysqlServer.mainUsed {
		t.Fatal("testenv: MySQL needs testenv.Main in the package's TestMain")
	}
	mysqlServer.once.Do(func() {
		mysqlServer.cfg, mysqlServer.stop, mysqlServer.err = mysqlServerConfig()
	})
	if mysqlServer.err != nil {
		t.Fatalf("testenv: MySQL server: %v", mysqlServer.err)
	}

	name := "fstest_" + strconv.Itoa(os.Getpid()) + "_" + randomHex(4)
	admin, err := sql.Open("mysql", mysqlServer.cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", mysqlServer.cfg.FormatDSN())
		if err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
			return
		}
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS `" + name + "`"); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
	})
	cfg := mysqlServer.cfg.Clone()
	cfg.DBName = name
	return cfg.FormatDSN()
}

func mysqlServerConfig() (*mysql.Config, func(), error) {
	if dsn := os.Getenv(MySQLTestDSNEnv); dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", MySQLTestDSNEnv, err)
		}
		cfg.DBName = ""
		cfg.ParseTime = true
		return cfg, nil, nil
	}
	return startMariaDB()
}

// MariaDB is a mariadbd process the tests own, in a temp datadir on a free
// port. Tests that need MySQL to go away (Stop, Kill) and come back (Start)
// get their own with StartMariaDB.
type MariaDB struct {
	dir, data string
	port      int
	common    []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startMariaDB bootstraps and starts a private mariadbd on a free port.
func startMariaDB() (*mysql.Config, func(), error) {
	m, err := bootMariaDB()
	if err != nil {
		return nil, nil, err
	}
	return m.Config(), m.remove, nil
}

func bootMariaDB() (*MariaDB, error) {
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := lookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found on PATH. Install it with `apt-get install mariadb-server`, "+
				"run `make test`, which installs it, or set %s to a server the tests may create databases on",
				bin, MySQLTestDSNEnv)
		}
	}
	sweepStaleMariaDBDirs()
	dir, err := os.MkdirTemp("", "fstest-mariadb-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	m := &MariaDB{dir: dir, data: filepath.Join(dir, "data")}
	// A tmpdir of its own: with the shared /tmp, CI once saw a bootstrap
	// fail on "Could not remove temporary table '/tmp/#sql-temptable-…'"
	// while other packages' servers were booting.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	m.common = []string{"--no-defaults", "--datadir=" + m.data, "--tmpdir=" + tmp, "--innodb-log-file-size=16M"}
	if os.Geteuid() == 0 {
		m.common = append(m.common, "--user=root") // mariadbd refuses to run as root otherwise
	}
	install := exec.Command(mustLookPath("mariadb-install-db"),
		append(m.common, "--auth-root-authentication-method=normal", "--skip-test-db")...)
	if out, err := install.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	if m.port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := m.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return m, nil
}

// Config is the server's address and credentials, no database.
func (m *MariaDB) Config() *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(m.port)
	cfg.ParseTime = true
	return cfg
}

// Start starts the server (again, after Stop or Kill) and waits until it
// answers.
func (m *MariaDB) Start() error {
	cmd := exec.Command(mustLookPath("mariadbd"), append(m.common,
		"--port="+strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--socket="+filepath.Join(m.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"),
		"--log-error="+filepath.Join(m.dir, "error.log"),
		"--innodb-buffer-pool-size=128M",
		"--innodb-flush-log-at-trx-commit=2", // throwaway data: skip the fsync per commit
		"--skip-log-bin",
		"--max-connections=1000",
	)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()

	db, err := sql.Open("mysql", m.Config().FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
			return fmt.Errorf("mariadbd exited during start-up:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			m.Kill()
			return fmt.Errorf("mariadbd not ready after 60s: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down cleanly (SIGTERM) and waits for it.
func (m *MariaDB) Stop() { m.signal(syscall.SIGTERM) }

// Kill kills the server (SIGKILL) and waits for it.
func (m *MariaDB) Kill() { m.signal(syscall.SIGKILL) }

// PID is the running server's process id, 0 when it is not running (after
// Stop or Kill). A benchmark reads mariadbd's CPU time by it
// (/proc/<pid>/stat: every thread of the one process).
func (m *MariaDB) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing
// answers, as a stalled host looks to a client. Resume continues it.
func (m *MariaDB) Pause() { m.signalRunning(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (m *MariaDB) Resume() { m.signalRunning(syscall.SIGCONT) }

// signalRunning sends sig to the server, which stays this MariaDB's.
func (m *MariaDB) signalRunning(sig syscall.Signal) {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
}

func (m *MariaDB) signal(sig syscall.Signal) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	<-exited
}

func (m *MariaDB) remove() {
	m.Kill()
	os.RemoveAll(m.dir)
}

// StartMariaDB starts a mariadbd of this test's own, whatever
// MYSQL_TEST_DSN says, with a fresh database whose DSN it returns. The server
// is removed when the test ends.
func StartMariaDB(t testing.TB) (*MariaDB, string) {
	t.Helper()
	m, err := bootMariaDB()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(m.remove)
	admin, err := sql.Open("mysql", m.Config().FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE fstest CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	cfg := m.Config()
	cfg.DBName = "fstest"
	return m, cfg.FormatDSN()
}

// sweepStaleMariaDBDirs removes datadirs left by test binaries that were
// killed (their mariadbd died with them through Pdeathsig, the dir did not).
func sweepStaleMariaDBDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "fstest-mariadb-*"))
	for _, d := range dirs {
		parts := strings.SplitN(strings.TrimPrefix(filepath.Base(d), "fstest-mariadb-"), "-", 2)
		pid, err := strconv.Atoi(parts[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
}

func mustLookPath(name string) string {
	p, err := lookPath(name)
	if err != nil {
		return name
	}
	return p
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
