package console_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/console"
)

func router() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	// The admin API beside it, as httpapi registers it: the routes coexist.
	r.GET("/admin/v1/activities", func(c *gin.Context) { c.String(200, "api") })
	console.Register(r)
	return r
}

func get(r http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

// The page, its script and its style are served with their types and a
// strict content security policy; /admin redirects to /admin/; the API's
// routes beside them still answer.
func TestConsole_servesItsFilesBesideTheAPI(t *testing.T) {
	r := router()
	for path, want := range map[string]string{
		"/admin/":                 "text/html",
		"/admin/assets/app.js":    "text/javascript",
		"/admin/assets/live.js":   "text/javascript",
		"/admin/assets/style.css": "text/css",
	} {
		w := get(r, path)
		if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), want) || w.Body.Len() == 0 {
			t.Errorf("%s: %d %q, %d bytes", path, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, w.Header())
		}
	}
	if w := get(r, "/admin/"); !strings.Contains(w.Body.String(), `src="assets/app.js"`) || !strings.Contains(w.Body.String(), `src="assets/live.js"`) {
		t.Errorf("the page does not load its scripts: %s", w.Body.String()[:300])
	}
	if w := get(r, "/admin"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/admin/" {
		t.Errorf("/admin: %d → %q", w.Code, w.Header().Get("Location"))
	}
	if w := get(r, "/admin/v1/activities"); w.Code != 200 || w.Body.String() != "api" {
		t.Errorf("the API beside the console: %d %q", w.Code, w.Body.String())
	}
}

// Unknown files are 404 in the API's error shape; the page is not served
// under assets/ (its relative links resolve from /admin/ only).
func TestConsole_unknownFiles_areNotFound(t *testing.T) {
	r := router()
	for _, path := range []string{"/admin/assets/nope.js", "/admin/assets/index.html", "/admin/assets/", "/admin/assets/../embed.go"} {
		if w := get(r, path); w.Code != 404 || !strings.Contains(w.Body.String(), `"NOT_FOUND"`) {
			t.Errorf("%s: %d %s", path, w.Code, w.Body.String())
		}
	}
}

// A browser that has a file revalidates it by ETag and gets 304.
func TestConsole_etag_answersNotModified(t *testing.T) {
	r := router()
	first := get(r, "/admin/assets/app.js")
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("headers %v", first.Header())
	}
	if w := get(r, "/admin/assets/app.js", "If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Fatalf("revalidation: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := get(r, "/admin/assets/app.js", "If-None-Match", `"stale"`); w.Code != 200 {
		t.Fatalf("a stale ETag: %d", w.Code)
	}
}

// The script puts API data into the page only as text: no HTML sinks at
// all, so an activity named "<img onerror=…>" stays a name. (The browser
// test in internal/app shows such a name rendered as text.)
func TestConsole_scripts_haveNoHTMLSinks(t *testing.T) {
	sinks := regexp.MustCompile(`\.(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write|\beval\(|new Function\(`)
	all := ""
	for _, name := range []string{"app.js", "live.js", "webhooks.js"} {
		js := get(router(), "/admin/assets/"+name).Body.String()
		if m := sinks.FindAllString(js, -1); len(m) > 0 || js == "" {
			t.Errorf("%s uses HTML sinks: %v", name, m)
		}
		all += js
	}
	if !strings.Contains(all, "sessionStorage") || strings.Contains(all, "localStorage") {
		t.Fatal("the token belongs in sessionStorage only")
	}
}

// Console routes are told apart from the API's (the OpenAPI test documents
// the latter only).
func TestIsConsoleRoute(t *testing.T) {
	for p, want := range map[string]bool{
		"/admin/": true, "/admin/assets/*file": true,
		"/admin/v1/activities": false, "/admin/v1/locks/:name": false, "/v1/orders": false,
	} {
		if got := console.IsConsoleRoute(p); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
}
