package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/console"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/presence"
)

// The OpenAPI document is valid OpenAPI 3, and its paths and operations are
// exactly the router's routes: a route added, renamed or dropped without
// the document (or the other way round) fails here.
func TestOpenAPI_documentsExactlyTheRoutes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("not valid OpenAPI 3: %v", err)
	}
	r := httpapi.NewRouter(httpapi.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Admin: &admin.Service{}, Shop: &httpapi.Shop{Presence: &presence.Tracker{}}, Metrics: http.NotFoundHandler(),
		Locks: &lock.Client{}})
	param := regexp.MustCompile(`:([a-z_]+)`)
	var routes, documented []string
	for _, rt := range r.Routes() {
		if console.IsConsoleRoute(rt.Path) {
			continue // the admin console's static files, not the API
		}
		routes = append(routes, rt.Method+" "+param.ReplaceAllString(rt.Path, "{$1}"))
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	if strings.Join(routes, "\n") != strings.Join(documented, "\n") {
		t.Fatalf("routes:\n  %s\ndocumented:\n  %s", strings.Join(routes, "\n  "), strings.Join(documented, "\n  "))
	}
}

// GET /openapi.json serves the document as JSON.
func TestOpenAPI_servedAsJSON(t *testing.T) {
	r := httpapi.NewRouter(httpapi.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/openapi.json", nil))
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || w.Code != 200 || doc.OpenAPI != "3.0.3" || len(doc.Paths) < 15 {
		t.Fatalf("%d %q: %v", w.Code, w.Body.String()[:min(200, w.Body.Len())], err)
	}
}
