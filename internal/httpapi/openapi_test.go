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
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/presence"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/waitingroom"
	"github.com/flashsale/flashsale/internal/webhook"
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
		Admin: &admin.Service{}, Shop: &httpapi.Shop{Presence: &presence.Tracker{}, Payments: &payment.Service{}, Queue: &waitingroom.Service{}, OrderStreams: &stream.Orders{}, QueueStreams: &stream.Queue{}}, Metrics: http.NotFoundHandler(),
		Locks: &lock.Client{}, Webhooks: &webhook.Service{}})
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

// Every answer of every operation has an example — its success and each
// error it documents — which Validate above checks against the answer's
// schema; and every operation of /v1 and /admin/v1 documents the 500
// INTERNAL an unexpected failure gets, in the shared error shape.
func TestOpenAPI_everyAnswerHasAnExample_andEveryAPIOperationA500(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	successes := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			for status, ref := range op.Responses.Map() {
				if len(ref.Value.Content) == 0 {
					missing = append(missing, where+" "+status+": no content")
				}
				for ct, mt := range ref.Value.Content {
					if mt.Example == nil && len(mt.Examples) == 0 {
						missing = append(missing, where+" "+status+" "+ct+": no example")
					} else if strings.HasPrefix(status, "2") {
						successes++
					}
				}
			}
			if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/admin/v1/") {
				r := op.Responses.Value("500")
				if r == nil || r.Value.Content.Get("application/json") == nil ||
					r.Value.Content.Get("application/json").Schema.Ref != "#/components/schemas/Error" {
					missing = append(missing, where+": no 500 in the error shape")
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || successes < 20 {
		t.Fatalf("%d success answers with examples; missing:\n  %s", successes, strings.Join(missing, "\n  "))
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
