package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// healthServer answers every request with status, and counts the /healthz
// requests it got.
func healthServer(t *testing.T, status int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			hits.Add(1)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"` + http.StatusText(status) + `"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
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

func TestHealthcheck_probesHTTPAddr(t *testing.T) {
	up, hits := healthServer(t, http.StatusOK)
	t.Setenv("HTTP_ADDR", port(t, up)) // no host: probed on 127.0.0.1
	if err := healthcheck(nil); err != nil {
		t.Fatalf("200 from /healthz: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("/healthz got %d requests, want 1", n)
	}
}

func TestHealthcheck_failures(t *testing.T) {
	down, _ := healthServer(t, http.StatusServiceUnavailable)
	redirect := httptest.NewServer(http.RedirectHandler("/elsewhere", http.StatusFound))
	t.Cleanup(redirect.Close)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // longer than probeTimeout, but not past the client giving up
		case <-r.Context().Done():
		case <-time.After(3 * probeTimeout):
		}
	}))
	t.Cleanup(stuck.Close)
	nobody := "http://" + testenv.FreeAddr(t) + "/healthz"

	for _, tc := range []struct {
		name, url, want string
		max             time.Duration
	}{
		{"503", down.URL + "/healthz", "503 Service Unavailable", time.Second},
		{"redirect", redirect.URL + "/healthz", "302 Found", time.Second},
		{"unreachable", nobody, "connection refused", time.Second},
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
}

func TestHealthcheck_badSettingsAreUnhealthy(t *testing.T) {
	for _, tc := range []struct{ name, addr, want string }{
		{"random port", "127.0.0.1:0", "no fixed port"},
		{"no port", "localhost", "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HTTP_ADDR", tc.addr)
			if err := healthcheck(nil); exitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("HTTP_ADDR=%q: %v, want unhealthy naming %q", tc.addr, err, tc.want)
			}
		})
	}
	if err := healthcheck([]string{"extra"}); exitCode(err) != 1 {
		t.Fatalf("unexpected argument: %v, want unhealthy", err)
	}
}

func TestHealthURL(t *testing.T) {
	for listen, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		"[::]:8080":      "http://127.0.0.1:8080/healthz",
		"10.1.2.3:9000":  "http://10.1.2.3:9000/healthz",
		"localhost:8080": "http://localhost:8080/healthz",
		"[::1]:8080":     "http://[::1]:8080/healthz",
	} {
		if got, err := healthURL(listen); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
}

// The real binary's exit status, which is what a container engine reads:
// 0 for a 200, 1 for anything else (never 2, reserved by Docker).
func TestAPI_healthcheckCommand_exitStatus(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	up, _ := healthServer(t, http.StatusOK)
	down, _ := healthServer(t, http.StatusServiceUnavailable)
	run := func(env ...string) (int, string) {
		child := testenv.StartChild(t, "TestAPI_healthcheckCommand_exitStatus", "api", env...)
		err := child.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, child.Output()
		case errors.As(err, &exit):
			return exit.ExitCode(), child.Output()
		}
		t.Fatalf("healthcheck: %v", err)
		return -1, ""
	}
	if code, out := run("API_ARGS=healthcheck", "HTTP_ADDR="+port(t, up)); code != 0 || !strings.Contains(out, "healthy: GET http://127.0.0.1"+port(t, up)+"/healthz: 200 OK") {
		t.Fatalf("healthy api: exit %d\n%s", code, out)
	}
	if code, out := run("API_ARGS=healthcheck", "HTTP_ADDR="+port(t, down)); code != 1 || !strings.Contains(out, "api: unhealthy: GET http://127.0.0.1"+port(t, down)+"/healthz: 503") {
		t.Fatalf("api answering 503: exit %d\n%s", code, out)
	}
	nobody := testenv.FreeAddr(t)
	if code, out := run("API_ARGS=healthcheck --url http://"+nobody+"/healthz", "HTTP_ADDR="+port(t, up)); code != 1 || !strings.Contains(out, "connection refused") {
		t.Fatalf("--url of an unreachable server: exit %d\n%s", code, out)
	}
}
