package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real nginx, running deploy/nginx/nginx.conf with the API replicas
// swapped for a stub that answers every path 200: on the public port
// /readyz and /metrics are answered 404 in the API's error shape by nginx
// itself, however the path is spelled, and never reach a replica; any
// other path is passed through (so the 404s are nginx's, not the stub's).
// /readyz names the dependency that is down and /metrics the deployment's
// internals: they are for the compose network, not the public.
func TestNginx_publicPort_hidesReadyzAndMetrics_passesTheRest(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"stub":%q}`, r.URL.Path)
	}))
	defer stub.Close()
	public, health := freeLoopbackAddr(t), freeLoopbackAddr(t)
	base := startNginx(t, public, health, strings.TrimPrefix(stub.URL, "http://"))

	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("GET %s: %d, not JSON: %q", path, resp.StatusCode, body)
		}
		return resp.StatusCode, v
	}
	for _, path := range []string{"/readyz", "/readyz?verbose=1", "//readyz", "/%72eadyz", "/metrics", "/v1/../metrics"} {
		status, body := get(path)
		e, _ := body["error"].(map[string]any)
		if status != http.StatusNotFound || e["code"] != "NOT_FOUND" {
			t.Errorf("GET %s on the public port: %d %v; want 404 NOT_FOUND from nginx", path, status, body)
		}
	}
	for _, path := range []string{"/healthz", "/v1/activities/1", "/readyz-not"} {
		if status, body := get(path); status != http.StatusOK || body["stub"] != path {
			t.Errorf("GET %s on the public port: %d %v; want the replica's 200", path, status, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range reached {
		if c := path.Clean(p); c == "/readyz" || c == "/metrics" {
			t.Errorf("a replica was asked for %s through the public port (asked: %v)", p, reached)
			break
		}
	}
}

// With no replica answering, nginx's own 503 is in the API's error shape
// and carries Retry-After, as the API's contract says every 503 does.
func TestNginx_noReplicaAnswers_is503WithRetryAfter(t *testing.T) {
	dead := freeLoopbackAddr(t) // closed once returned: connections are refused
	base := startNginx(t, freeLoopbackAddr(t), freeLoopbackAddr(t), dead)
	resp, err := http.Get(base + "/v1/activities/1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		resp.Header.Get("Retry-After") != "1" || body.Error.Code != "UNAVAILABLE" {
		t.Fatalf("%d Retry-After %q %q: %v", resp.StatusCode, resp.Header.Get("Retry-After"), raw, err)
	}
}

// startNginx runs deploy/nginx/nginx.conf (made runnable as nginxTest does,
// after `nginx -t` accepts it) with its public server on public, its health
// server on health and every upstream server at upstream, until the test
// ends; it returns the public base URL once nginx answers.
func startNginx(t *testing.T, public, health, upstream string) string {
	t.Helper()
	src, err := os.ReadFile(nginxConfPath)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(src)
	for from, to := range map[string]string{
		`(?m)^(\s*listen\s+)80;`:                      "${1}" + public + ";",
		`(?m)^(\s*listen\s+)127\.0\.0\.1:8090;`:       "${1}" + health + ";",
		`(?m)^(\s*server\s+)[A-Za-z0-9_.-]+:8080(\s)`: "${1}" + upstream + "${2}",
	} {
		re := regexp.MustCompile(from)
		if !re.MatchString(conf) {
			t.Fatalf("nginx.conf: nothing matches %s: the test's rewrite needs updating", from)
		}
		conf = re.ReplaceAllString(conf, to)
	}
	conf, err = nginxTest(t, conf)
	if err != nil {
		t.Fatalf("%v\nas tested:\n%s", err, conf)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBinary(t), "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", file, "-g", "daemon off;")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // nginx's fast shutdown, workers included
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// Ready once the health server answers (a loaded machine may take a while).
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get("http://" + health + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return "http://" + public
			}
		}
		select {
		case <-done:
			t.Fatalf("nginx exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx not answering on %s after 20 s: %v\n%s", health, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeLoopbackAddr is a 127.0.0.1 address with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
