package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childRoleEnv tells a re-executed test binary which part it plays.
const childRoleEnv = "FLASHSALE_TEST_CHILD_ROLE"

// ChildRole returns the role this process was started with by StartChild, or
// "" in the parent test process. A multi-process test begins with:
//
//	if role := testenv.ChildRole(); role != "" { runChild(t, role); return }
func ChildRole() string { return os.Getenv(childRoleEnv) }

// Child is a re-executed copy of the test binary running one test as a
// separate OS process.
type Child struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// StartChild re-executes the test binary to run only test (a top-level test
// name) with ChildRole() == role and the extra environment env ("K=V"). The
// child is killed when the test ends; its output is logged if the test fails.
func StartChild(t testing.TB, test, role string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), childRoleEnv+"="+role), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start child %s: %v", role, err)
	}
	c := &Child{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			t.Logf("child %s (pid %d) output:\n%s", role, cmd.Process.Pid, out.String())
		}
	})
	return c
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the child to die.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Wait waits for the child to exit and returns its error (nil on exit 0).
func (c *Child) Wait() error {
	<-c.exited
	return c.err
}

// RunChild starts a child as StartChild does, waits for it, and returns its
// exit status and output; a child that could not run fails the test.
func RunChild(t testing.TB, test, role string, env ...string) (code int, output string) {
	t.Helper()
	c := StartChild(t, test, role, env...)
	err := c.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, c.Output()
	case errors.As(err, &exit):
		return exit.ExitCode(), c.Output()
	}
	t.Fatalf("%s child: %v\n%s", role, err, c.Output())
	return -1, ""
}

// Exited is closed when the child has exited.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Output is what the child has printed so far.
func (c *Child) Output() string { return c.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Terminate sends SIGTERM and waits up to timeout for the child to exit. It
// returns the exit error (nil for status 0), or an error if it did not exit.
func (c *Child) Terminate(timeout time.Duration) error {
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-c.exited:
		return c.err
	case <-time.After(timeout):
		return fmt.Errorf("still running %v after SIGTERM", timeout)
	}
}

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }
