package health_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/testenv"
)

// command is Command as the binaries call it, on a listen address.
func command(args []string, listen string) error {
	return health.Command(args, "HTTP_ADDR", "usage", func() (string, error) { return listen, nil })
}

func TestCommand_failures(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"Service Unavailable"}`))
	}))
	t.Cleanup(down.Close)
	redirect := httptest.NewServer(http.RedirectHandler("/elsewhere", http.StatusFound))
	t.Cleanup(redirect.Close)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // longer than ProbeTimeout, but not past the client giving up
		case <-r.Context().Done():
		case <-time.After(3 * health.ProbeTimeout):
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
		{"too slow", stuck.URL + "/healthz", "Timeout", health.ProbeTimeout + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := command([]string{"--url", tc.url}, ":1")
			if !errors.Is(err, health.ErrUnhealthy) || health.ExitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (exit %d), want unhealthy (exit 1) naming %q", err, health.ExitCode(err), tc.want)
			}
			if took := time.Since(start); took > tc.max {
				t.Fatalf("took %v, want under %v", took, tc.max)
			}
		})
	}
}

func TestCommand_badSettingsAreUnhealthy(t *testing.T) {
	for _, tc := range []struct{ name, addr, want string }{
		{"random port", "127.0.0.1:0", "no fixed port"},
		{"no port", "localhost", "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := command(nil, tc.addr); health.ExitCode(err) != 1 || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "HTTP_ADDR") {
				t.Fatalf("HTTP_ADDR=%q: %v, want unhealthy naming HTTP_ADDR and %q", tc.addr, err, tc.want)
			}
		})
	}
	if err := command([]string{"extra"}, ":1"); health.ExitCode(err) != 1 {
		t.Fatalf("unexpected argument: %v, want unhealthy", err)
	}
	if health.ExitCode(errors.New("usage")) != 2 {
		t.Fatal("an error other than unhealthy must exit 2")
	}
}

func TestURL(t *testing.T) {
	for listen, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		"[::]:8080":      "http://127.0.0.1:8080/healthz",
		"10.1.2.3:9000":  "http://10.1.2.3:9000/healthz",
		"localhost:8080": "http://localhost:8080/healthz",
		"[::1]:8080":     "http://[::1]:8080/healthz",
	} {
		if got, err := health.URL(listen); err != nil || got != want {
			t.Errorf("URL(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
}

func TestLocalAddr_unspecifiedHostIsLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:8080":      "127.0.0.1:8080",
		"0.0.0.0:8080":   "127.0.0.1:8080",
		":8080":          "127.0.0.1:8080",
		"127.0.0.1:9000": "127.0.0.1:9000",
		"10.1.2.3:80":    "10.1.2.3:80",
		"[::1]:8080":     "[::1]:8080",
	} {
		if got := health.LocalAddr(in); got != want {
			t.Errorf("LocalAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
