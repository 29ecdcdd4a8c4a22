package testenv_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
)

// A benchmark reads a server's CPU time from /proc/<pid>/stat: the PID must
// be the server itself, and 0 once it is gone, not a stale number another
// process may take.
func TestRedisServer_PID_isTheServerWhileItRuns(t *testing.T) {
	srv := testenv.StartRedis(t)
	if got := comm(t, srv.PID()); got != "redis-server" {
		t.Fatalf("PID %d is %q, want redis-server", srv.PID(), got)
	}
	srv.Kill()
	if pid := srv.PID(); pid != 0 {
		t.Fatalf("PID after Kill: %d, want 0", pid)
	}
	srv.Restart()
	if got := comm(t, srv.PID()); got != "redis-server" {
		t.Fatalf("PID %d after Restart is %q, want redis-server", srv.PID(), got)
	}
}

func TestMariaDB_PID_isTheServerWhileItRuns(t *testing.T) {
	m, _ := testenv.StartMariaDB(t)
	if got := comm(t, m.PID()); got != "mariadbd" {
		t.Fatalf("PID %d is %q, want mariadbd", m.PID(), got)
	}
	m.Stop()
	if pid := m.PID(); pid != 0 {
		t.Fatalf("PID after Stop: %d, want 0", pid)
	}
}

// comm is the command name of process pid (/proc/<pid>/comm).
func comm(t *testing.T, pid int) string {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("PID %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
