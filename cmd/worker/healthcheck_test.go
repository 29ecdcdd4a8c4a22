package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// healthServer answers every request with status.
func healthServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// port is the port of an httptest server, as a listen address with no host.
func port(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return ":" + p
}

// The worker probes WORKER_HTTP_ADDR, not the API's HTTP_ADDR.
func TestHealthcheck_probesWorkerHTTPAddr(t *testing.T) {
	up, down := healthServer(t, http.StatusOK), healthServer(t, http.StatusServiceUnavailable)
	t.Setenv("HTTP_ADDR", port(t, down))
	t.Setenv("WORKER_HTTP_ADDR", port(t, up))
	if err := healthcheck(nil); err != nil {
		t.Fatalf("200 from the worker's /healthz: %v", err)
	}
	t.Setenv("WORKER_HTTP_ADDR", port(t, down))
	if err := healthcheck(nil); exitCode(err) != 1 || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 from the worker's /healthz: %v, want unhealthy", err)
	}
}

func TestHealthcheck_failures(t *testing.T) {
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * probeTimeout):
		}
	}))
	t.Cleanup(stuck.Close)
	for _, tc := range []struct {
		name, url, want string
		max             time.Duration
	}{
		{"503", healthServer(t, http.StatusServiceUnavailable).URL + "/healthz", "503 Service Unavailable", time.Second},
		{"unreachable", "http://" + testenv.FreeAddr(t) + "/healthz", "connection refused", time.Second},
		{"too slow", stuck.URL + "/healthz", "Timeout", probeTimeout + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := healthcheck([]string{"--url", tc.url})
			if !errors.Is(err, errUnhealthy) || exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (exit %d), want unhealthy (exit 1) naming %q", err, exitCode(err), tc.want)
			}
			if took := time.Since(start); took > tc.max {
				t.Fatalf("took %v, want under %v", took, tc.max)
			}
		})
	}
	t.Setenv("WORKER_HTTP_ADDR", "127.0.0.1:0")
	if err := healthcheck(nil); exitCode(err) != 1 || !strings.Contains(err.Error(), "WORKER_HTTP_ADDR") {
		t.Fatalf("WORKER_HTTP_ADDR on a random port: %v, want unhealthy naming it", err)
	}
}

// The real binary's exit status: 0 for a 200, 1 for anything else; an
// unknown command is a usage error (2).
func TestWorker_commands_exitStatus(t *testing.T) {
	if testenv.ChildRole() == "worker" {
		runMain()
		return
	}
	up, down := healthServer(t, http.StatusOK), healthServer(t, http.StatusServiceUnavailable)
	run := func(env ...string) (int, string) {
		child := testenv.StartChild(t, "TestWorker_commands_exitStatus", "worker", env...)
		err := child.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, child.Output()
		case errors.As(err, &exit):
			return exit.ExitCode(), child.Output()
		}
		t.Fatalf("worker: %v", err)
		return -1, ""
	}
	if code, out := run("WORKER_ARGS=healthcheck", "WORKER_HTTP_ADDR="+port(t, up)); code != 0 || !strings.Contains(out, "healthy: GET http://127.0.0.1"+port(t, up)+"/healthz: 200 OK") {
		t.Fatalf("healthy worker: exit %d\n%s", code, out)
	}
	if code, out := run("WORKER_ARGS=healthcheck", "WORKER_HTTP_ADDR="+port(t, down)); code != 1 || !strings.Contains(out, "worker: unhealthy: GET http://127.0.0.1"+port(t, down)+"/healthz: 503") {
		t.Fatalf("worker answering 503: exit %d\n%s", code, out)
	}
	if code, out := run("WORKER_ARGS=frobnicate"); code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: exit %d\n%s", code, out)
	}
}
