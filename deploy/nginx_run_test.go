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
// /readyz, /metrics and the admin API and console (/admin/) are answered
// 404 in the API's error shape by nginx itself, however the path is
// spelled, and never reach a replica; any other path is passed through (so
// the 404s are nginx's, not the stub's). /readyz names the dependency that
// is down and /metrics the deployment's internals: they are for the
// compose network, not the public; /admin/ is for the admin port, which
// passes /admin/ through and nothing else.
func TestNginx_publicPort_hidesReadyzMetricsAndAdmin_adminPortPassesAdminOnly(t *testing.T) {
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
	public, health, adminAddr := freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t)
	base, adminBase := startNginx(t, public, health, adminAddr, strings.TrimPrefix(stub.URL, "http://"))

	getFrom := func(base, path string) (int, map[string]any) {
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
	get := func(path string) (int, map[string]any) { t.Helper(); return getFrom(base, path) }
	for _, path := range []string{"/readyz", "/readyz?verbose=1", "//readyz", "/%72eadyz", "/metrics", "/v1/../metrics",
		"/admin", "/admin/", "/admin/v1/activities", "//admin/v1/activities", "/%61dmin/v1/activities", "/v1/../admin/v1/presence"} {
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
	for _, p := range reached {
		if c := path.Clean(p); c == "/readyz" || c == "/metrics" || c == "/admin" || strings.HasPrefix(c, "/admin/") {
			t.Errorf("a replica was asked for %s through the public port (asked: %v)", p, reached)
			break
		}
	}
	reached = nil
	mu.Unlock()

	for _, path := range []string{"/admin/", "/admin/v1/activities", "/admin/v1/presence?activity_id=1"} {
		if status, body := getFrom(adminBase, path); status != http.StatusOK || body["stub"] != strings.Split(path, "?")[0] {
			t.Errorf("GET %s on the admin port: %d %v; want the replica's 200", path, status, body)
		}
	}
	for _, path := range []string{"/v1/activities/1", "/metrics", "/healthz", "/"} {
		status, body := getFrom(adminBase, path)
		if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != "NOT_FOUND" {
			t.Errorf("GET %s on the admin port: %d %v; want 404 NOT_FOUND from nginx", path, status, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 3 {
		t.Errorf("through the admin port a replica was asked for %v; want the 3 /admin/ paths only", reached)
	}
}

// With no replica answering, nginx's own 503 is in the API's error shape
// and carries Retry-After, as the API's contract says every 503 does.
func TestNginx_noReplicaAnswers_is503WithRetryAfter(t *testing.T) {
	dead := freeLoopbackAddr(t) // closed once returned: connections are refused
	base, _ := startNginx(t, freeLoopbackAddr(t), freeLoopbackAddr(t), freeLoopbackAddr(t), dead)
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
// server on health, its admin server on admin and every upstream server at
// upstream, until the test ends; it returns the public and admin base URLs
// once nginx answers.
func startNginx(t *testing.T, public, health, admin, upstream string) (string, string) {
	t.Helper()
	src, err := os.ReadFile(nginxConfPath)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(src)
	for from, to := range map[string]string{
		`(?m)^(\s*listen\s+)80;`:                      "${1}" + public + ";",
		`(?m)^(\s*listen\s+)127\.0\.0\.1:8090;`:       "${1}" + health + ";",
		`(?m)^(\s*listen\s+)8081;`:                    "${1}" + admin + ";",
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
				return "http://" + public, "http://" + admin
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
