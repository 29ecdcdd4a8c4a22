package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// `make run` as a newcomer types it, with nothing configured: it says it is
// building before the build's silence, builds, then serves embedded mode
// (the demo's block is printed), and a Ctrl-C stops it. The binary goes to
// a temp dir (API_BIN), not the checkout's bin/.
func TestMakeRun_saysItIsBuildingThenServesEmbeddedMode(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	addr := testenv.FreeAddr(t)
	cmd := exec.Command("make", "--no-print-directory", "run", "API_BIN="+filepath.Join(t.TempDir(), "api"))
	cmd.Dir = filepath.Join("..", "..")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "REDIS_URL" && name != "MYSQL_DSN" && name != "HTTP_ADDR" && name != "MAKEFLAGS" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HTTP_ADDR="+addr)
	// Its own process group, as a terminal's foreground job: Ctrl-C reaches
	// make and the API alike.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	var mu sync.Mutex
	var lines []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	output := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) }

	// A first build on a loaded machine takes minutes; the first line comes
	// at once.
	deadline := time.Now().Add(5 * time.Minute)
	for len(output()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := output(); len(got) == 0 || !strings.HasPrefix(got[0], "make run: building ./cmd/api into ") {
		t.Fatalf("make run's first line is %q, want it to say it is building", got)
	}
	testenv.WaitHTTP(t, "http://"+addr+"/healthz", time.Until(deadline))
	for !strings.Contains(strings.Join(output(), "\n"), "flashsale EMBEDDED MODE") {
		if time.Now().After(deadline) {
			t.Fatalf("no embedded-mode demo block:\n%s", strings.Join(output(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := strings.Join(output(), "\n")
	if b, s := strings.Index(got, "make run: building"), strings.Index(got, "make run: built; starting "); b < 0 || s < b {
		t.Fatalf("make run does not say building, then starting:\n%s", got)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run still running 30 s after Ctrl-C:\n%s", strings.Join(output(), "\n"))
	}
}
