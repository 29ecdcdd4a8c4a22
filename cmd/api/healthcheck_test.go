package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestHealthcheck_probesHTTPAddr(t *testing.T) {
	up := testenv.StartHealthServer(t, http.StatusOK)
	t.Setenv("HTTP_ADDR", up.ListenAddr()) // no host: probed on 127.0.0.1
	if err := healthcheck(nil); err != nil {
		t.Fatalf("200 from /healthz: %v", err)
	}
	if n := up.Hits.Load(); n != 1 {
		t.Fatalf("/healthz got %d requests, want 1", n)
	}
}

// HTTP_ADDR is read from the environment and named when it cannot be probed.
func TestHealthcheck_badHTTPAddrIsUnhealthy(t *testing.T) {
	t.Setenv("HTTP_ADDR", "127.0.0.1:0")
	if err := healthcheck(nil); health.ExitCode(err) != 1 || !strings.Contains(err.Error(), "HTTP_ADDR") ||
		!strings.Contains(err.Error(), "no fixed port") {
		t.Fatalf("HTTP_ADDR on a random port: %v, want unhealthy naming it", err)
	}
}

// The real binary's exit status, which is what a container engine reads:
// 0 for a 200, 1 for anything else (never 2, reserved by Docker).
func TestAPI_healthcheckCommand_exitStatus(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	up := testenv.StartHealthServer(t, http.StatusOK)
	down := testenv.StartHealthServer(t, http.StatusServiceUnavailable)
	run := func(env ...string) (int, string) {
		return testenv.RunChild(t, "TestAPI_healthcheckCommand_exitStatus", "api", env...)
	}
	if code, out := run("API_ARGS=healthcheck", "HTTP_ADDR="+up.ListenAddr()); code != 0 || !strings.Contains(out, "healthy: GET http://127.0.0.1"+up.ListenAddr()+"/healthz: 200 OK") {
		t.Fatalf("healthy api: exit %d\n%s", code, out)
	}
	if code, out := run("API_ARGS=healthcheck", "HTTP_ADDR="+down.ListenAddr()); code != 1 || !strings.Contains(out, "api: unhealthy: GET http://127.0.0.1"+down.ListenAddr()+"/healthz: 503") {
		t.Fatalf("api answering 503: exit %d\n%s", code, out)
	}
	nobody := testenv.FreeAddr(t)
	if code, out := run("API_ARGS=healthcheck --url http://"+nobody+"/healthz", "HTTP_ADDR="+up.ListenAddr()); code != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("--url of an unreachable server: exit %d\n%s", code, out)
	}
}
