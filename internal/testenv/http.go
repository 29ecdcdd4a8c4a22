package testenv

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// WaitHTTP polls url until it answers (any status) or timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitHTTP(t, url, timeout, nil)
}

// WaitHTTP polls url until it answers, failing at once if the child exits.
func (c *Child) WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	waitHTTP(t, url, timeout, c)
}

func waitHTTP(t testing.TB, url string, timeout time.Duration, c *Child) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if c != nil {
			select {
			case <-c.exited:
				t.Fatalf("testenv: child exited before %s answered: %v\n%s", url, c.err, c.Output())
			default:
			}
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GetJSON fetches url and decodes its JSON body into a map.
func GetJSON(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: status %d, body %q is not JSON: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, body
}

// WaitReady polls url until it answers 200 or timeout passes; it fails the
// test with the last answer.
func WaitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("testenv: %s still %d after %v: %s", url, resp.StatusCode, timeout, b)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("testenv: %s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HealthServer is an HTTP server that answers every request with status,
// counting the requests to /healthz; it closes when the test ends. Its
// ListenAddr is what a program's *_HTTP_ADDR would be set to.
type HealthServer struct {
	*httptest.Server
	Hits atomic.Int32
}

// StartHealthServer starts a HealthServer answering status.
func StartHealthServer(t testing.TB, status int) *HealthServer {
	t.Helper()
	h := &HealthServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			h.Hits.Add(1)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"` + http.StatusText(status) + `"}`))
	}))
	t.Cleanup(h.Close)
	return h
}

// ListenAddr is the server's port as a listen address with no host (":port"),
// the form of HTTP_ADDR.
func (h *HealthServer) ListenAddr() string {
	_, p, _ := net.SplitHostPort(h.Listener.Addr().String())
	return ":" + p
}
