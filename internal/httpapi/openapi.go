package httpapi

import (
	_ "embed"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/goccy/go-yaml"
)

// OpenAPIYAML is the API's OpenAPI 3 document, written by hand next to the
// handlers it describes. Tests keep it true: the router's routes and its
// paths are the same set, every request and answer of the end-to-end tests
// validates against it (internal/app), and openapi_live_test.go drives the
// running api through every operation and error rule of it, validated by
// kin-openapi (apitest.Contract); make lint runs redocly's linter on it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON is the document as served, converted once.
var openAPIJSON = func() []byte {
	j, err := yaml.YAMLToJSON(OpenAPIYAML)
	if err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml: %v", err)) // a build mistake, caught by every test
	}
	return j
}()

func serveOpenAPI(r gin.IRoutes) {
	r.GET("/openapi.json", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", openAPIJSON) })
}
