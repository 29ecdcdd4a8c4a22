package testenv

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StripeMockVersion is the stripe-mock the tests run: Stripe's own mock
// of its API, a real server that validates every request against Stripe's
// OpenAPI description and answers with its fixtures (it keeps no state: a
// PaymentIntent created is not what a later read returns). The test
// command installs it (scripts/ensure-test-servers.sh: go install).
const StripeMockVersion = "v0.203.0"

// StripeMock is a stripe-mock process owned by one test.
type StripeMock struct {
	URL string // its HTTP API, e.g. http://127.0.0.1:41234 (STRIPE_API_URL)
	cmd *exec.Cmd
	out bytes.Buffer
}

// StartStripeMock starts stripe-mock on free loopback ports, stopped when
// the test ends.
func StartStripeMock(t testing.TB) *StripeMock {
	t.Helper()
	bin, err := lookPath("stripe-mock")
	if err != nil {
		t.Fatalf("testenv: stripe-mock not found on PATH (%v). Install it with "+
			"`go install github.com/stripe/stripe-mock@%s` (and put $(go env GOPATH)/bin on PATH), or run `make test`, which does.",
			err, StripeMockVersion)
	}
	var m *StripeMock
	for range 5 { // a free port can be taken between probe and bind: retry
		m, err = startStripeMock(bin)
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("testenv: start stripe-mock: %v", err)
	}
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	})
	return m
}

func startStripeMock(bin string) (*StripeMock, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	m := &StripeMock{URL: "http://" + addr}
	// HTTPS on a port of the system's choosing: stripe-mock starts it
	// beside -http-addr on its fixed default, 12112, unless told, and a
	// second stripe-mock (another package's test at once) would fail to
	// bind it.
	m.cmd = exec.Command(bin, "-http-addr", addr, "-https-addr", "127.0.0.1:0")
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(m.URL + "/v1/charges")
		if err == nil {
			resp.Body.Close()
			return m, nil
		}
		if m.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	return nil, fmt.Errorf("stripe-mock did not answer on %s:\n%s", m.URL, m.out.String())
}
