package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestHealthcheck_probesWorkerHTTPAddr(t *testing.T) {
	up, down := testenv.StartHealthServer(t, http.StatusOK), testenv.StartHealthServer(t, http.StatusServiceUnavailable)
	t.Setenv("HTTP_ADDR", down.ListenAddr())
	t.Setenv("WORKER_HTTP_ADDR", up.ListenAddr())
	if err := healthcheck(nil); err != nil {
		t.Fatalf("200 from the worker's /healthz: %v", err)
	}
	t.Setenv("WORKER_HTTP_ADDR", down.ListenAddr())
	if err := healthcheck(nil); health.ExitCode(err) != 1 || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503 from the worker's /healthz: %v, want unhealthy", err)
	}
}

// WORKER_HTTP_ADDR is named when it cannot be probed.
func TestHealthcheck_badWorkerHTTPAddrIsUnhealthy(t *testing.T) {
	t.Setenv("WORKER_HTTP_ADDR", "127.0.0.1:0")
	if err := healthcheck(nil); health.ExitCode(err) != 1 || !strings.Contains(err.Error(), "WORKER_HTTP_ADDR") {
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
	up, down := testenv.StartHealthServer(t, http.StatusOK), testenv.StartHealthServer(t, http.StatusServiceUnavailable)
	run := func(env ...string) (int, string) {
		return testenv.RunChild(t, "TestWorker_commands_exitStatus", "worker", env...)
	}
	if code, out := run("WORKER_ARGS=healthcheck", "WORKER_HTTP_ADDR="+up.ListenAddr()); code != 0 || !strings.Contains(out, "healthy: GET http://127.0.0.1"+up.ListenAddr()+"/healthz: 200 OK") {
		t.Fatalf("healthy worker: exit %d\n%s", code, out)
	}
	if code, out := run("WORKER_ARGS=healthcheck", "WORKER_HTTP_ADDR="+down.ListenAddr()); code != 1 || !strings.Contains(out, "worker: unhealthy: GET http://127.0.0.1"+down.ListenAddr()+"/healthz: 503") {
		t.Fatalf("worker answering 503: exit %d\n%s", code, out)
	}
	if code, out := run("WORKER_ARGS=frobnicate"); code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: exit %d\n%s", code, out)
	}
}
