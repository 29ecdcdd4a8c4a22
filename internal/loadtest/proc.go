package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// Proc is a child process of the kit: an api, a worker, nginx. Its output
// goes to <dir>/<name>.log.
type Proc struct {
	Name string
	Addr string // where it serves HTTP
	log  string

	bin       string // what Restart runs again
	args, env []string
	mu        sync.Mutex // cmd and exited change on Restart
	cmd       *exec.Cmd
	exited    chan struct{}
	net       *testenv.Network // runs it as its host there (Stack's Network)
}

// StartProc starts bin with args and env (added to this process's), its
// output in dir/name.log. It dies with this process.
func StartProc(dir, name, addr, bin string, args, env []string) (*Proc, error) {
	p := &Proc{Name: name, Addr: addr, log: filepath.Join(dir, name+".log"), bin: bin, args: args, env: env}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// start runs the process, its output appended to its log: a restarted
// process's log follows its predecessor's, for reading after a fault.
func (p *Proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	if p.net != nil {
		cmd = p.net.Command(p.Name, p.bin, p.args...)
	}
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// current is the running (or last) process and its exit notice.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// PID is the process id.
func (p *Proc) PID() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

// WaitHTTP waits until GET url answers 200, the process exits, or timeout.
func (p *Proc) WaitHTTP(url string, timeout time.Duration) error {
	_, exited := p.current()
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up; its log:\n%s", p.Name, p.tail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v: %v; its log:\n%s", p.Name, url, timeout, err, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail is the end of the process's log.
func (p *Proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// PeakRSS is the process's peak resident memory so far (VmHWM), in bytes.
func (p *Proc) PeakRSS() (int64, error) { return peakRSS(p.PID()) }

func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// Stop asks the process to end (SIGTERM) and waits up to timeout, then
// kills it.
func (p *Proc) Stop(timeout time.Duration) {
	cmd, exited := p.current()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Kill kills the process with SIGKILL and waits until it is gone: no
// shutdown, so requests and tasks in flight are cut off where they stand
// (the soak's fault).
func (p *Proc) Kill() {
	cmd, exited := p.current()
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the process again after it exited (Kill, Stop): the same
// binary, arguments and environment, so the same address, which nginx's
// upstream still names. Wait for it as after a start (WaitHTTP).
func (p *Proc) Restart() error {
	if _, exited := p.current(); !isClosed(exited) {
		return fmt.Errorf("restart %s: still running (pid %d)", p.Name, p.PID())
	}
	return p.start()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// FreeAddr is a loopback host:port that was free a moment ago, for a
// process to bind next: drawn as the tests' servers' are
// (testenv.FreePort, below the kernel's ephemeral range, where no outgoing
// connection takes it in the meantime).
func FreeAddr() (string, error) {
	p, err := testenv.FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}

// Build compiles cmd/api and cmd/worker of the module at root into dir and
// returns their paths.
func Build(ctx context.Context, root, dir string) (api, worker string, err error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", dir+string(filepath.Separator), "./cmd/api", "./cmd/worker")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return filepath.Join(dir, "api"), filepath.Join(dir, "worker"), nil
}

// ModuleRoot is the directory of the flashsale module this program runs in
// (go env GOMOD, from the working directory; from bench/, its parent).
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the flashsale module: run from the repository")
	}
	for dir := filepath.Dir(mod); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "api")); err == nil {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			return "", fmt.Errorf("no cmd/api above %s: run from the flashsale repository", mod)
		}
	}
}
