package testenv

import (
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Toxiproxy is a toxiproxy-server process: Shopify's fault-injection TCP
// proxy, whose proxies sit on a link between two processes and whose
// toxics break it (cut it, one way or both; slow it; reset it; close it
// after N bytes). The test command builds it from the version go.mod names
// (scripts/ensure-test-servers.sh: go build …/toxiproxy/v2/cmd/server), so
// the server and the client library here are one release.
type Toxiproxy struct {
	URL    string            // its HTTP API, e.g. http://127.0.0.1:41234
	Client *toxiproxy.Client // talks to it
	cmd    *exec.Cmd
	out    *syncBuffer
}

// StartToxiproxy starts toxiproxy-server on a free loopback port, stopped
// when the test ends.
func StartToxiproxy(t testing.TB) *Toxiproxy {
	t.Helper()
	tp, err := LaunchToxiproxy()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(tp.Close)
	return tp
}

// LaunchToxiproxy starts toxiproxy-server on a free loopback port. Close
// stops it.
func LaunchToxiproxy() (*Toxiproxy, error) {
	bin, err := lookPath("toxiproxy-server")
	if err != nil {
		return nil, fmt.Errorf("toxiproxy-server not found on PATH (%v). Run `make test` once, which builds it "+
			"(go build -o $(go env GOPATH)/bin/toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server, in this module)", err)
	}
	var tp *Toxiproxy
	for range 5 { // a free port can be taken between probe and bind: retry
		if tp, err = startToxiproxy(bin); err == nil {
			return tp, nil
		}
	}
	return nil, fmt.Errorf("start toxiproxy-server: %w", err)
}

func startToxiproxy(bin string) (*Toxiproxy, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	tp := &Toxiproxy{URL: "http://127.0.0.1:" + strconv.Itoa(port), out: &syncBuffer{}}
	tp.cmd = exec.Command(bin, "-host", "127.0.0.1", "-port", strconv.Itoa(port))
	tp.cmd.Stdout, tp.cmd.Stderr = tp.out, tp.out
	tp.cmd.Env = append(tp.cmd.Environ(), "LOG_LEVEL=warn")
	tp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := tp.cmd.Start(); err != nil {
		return nil, err
	}
	tp.Client = toxiproxy.NewClient(tp.URL)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := tp.Client.Version(); err == nil {
			return tp, nil
		}
		if tp.cmd.ProcessState != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	tp.Close()
	return nil, fmt.Errorf("toxiproxy-server did not answer on %s:\n%s", tp.URL, tp.out.String())
}

// Close kills the server; its proxies and their connections go with it.
func (tp *Toxiproxy) Close() {
	_ = tp.cmd.Process.Kill()
	_ = tp.cmd.Wait()
}

// Output is what the server logged.
func (tp *Toxiproxy) Output() string { return tp.out.String() }

// Proxy makes a proxy named name in front of upstream ("host:port"),
// listening on a free loopback port (its Listen field says which).
func (tp *Toxiproxy) Proxy(name, upstream string) (*toxiproxy.Proxy, error) {
	return tp.Client.CreateProxy(name, "127.0.0.1:0", upstream)
}
