// Package apitest holds the API's OpenAPI document to account in tests:
// Contract is an http.RoundTripper that checks every exchange of a test's
// client against internal/httpapi/openapi.yaml, so the document cannot
// drift from what the service does.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/flashsale/flashsale/internal/httpapi"
)

// document is the OpenAPI document and its router, loaded once for every
// end-to-end test.
type document struct {
	doc    *openapi3.T
	router routers.Router
}

var contract = sync.OnceValues(func() (document, error) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIYAML)
	if err != nil {
		return document{}, err
	}
	doc.Servers = nil // match any host: the tests' servers listen on random ports
	// gorillamux, not legacy: for a documented path with an undocumented
	// method legacy answers "method not allowed" only for a path without
	// parameters (it looks the request's own path up among the templates),
	// and as a fresh RouteError that errors.Is cannot tell from "path not
	// found"; gorillamux answers routers.ErrMethodNotAllowed itself.
	r, err := gorillamux.NewRouter(doc)
	return document{doc, r}, err
})

// Contract is an http.RoundTripper that checks every exchange against the
// OpenAPI document and reports a mismatch to T: each answer's status is
// documented for its operation, and its headers (Retry-After where it is
// required) and body fit the schema; a request the service accepted (2xx)
// fits too. (A request it refused may be malformed on purpose: the
// bad-input tests send such.) A method a documented path does not have
// must be answered 405 in the error shape, with Allow naming exactly the
// path's documented methods: the document states that rule in words, as
// OpenAPI cannot attach an answer to an operation that does not exist.
type Contract struct {
	T    testing.TB
	Next http.RoundTripper // nil: http.DefaultTransport
}

// Client is an http.Client whose every exchange is checked by Contract.
func Client(t testing.TB) *http.Client { return &http.Client{Transport: Contract{T: t}} }

// RoundTrip sends req and checks the exchange.
func (v Contract) RoundTrip(req *http.Request) (*http.Response, error) {
	next := v.Next
	if next == nil {
		next = http.DefaultTransport
	}
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		// A body cut off (a server killed mid-answer) is a transport
		// failure, as the caller would have seen it reading the body; there
		// is no answer to check.
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if err := check(req, reqBody, resp, respBody); err != nil {
		v.T.Errorf("OpenAPI contract: %s %s → %d: %v\nrequest %s\nanswer %s", req.Method, req.URL.Path, resp.StatusCode, err, reqBody, respBody)
	}
	return resp, nil
}

func check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	d, err := contract()
	if err != nil {
		return err
	}
	r := d.router
	clone := req.Clone(context.Background())
	clone.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && clone.Header.Get("Content-Type") == "" {
		// The service reads a body sent with no Content-Type as JSON (the
		// document says so in words: OpenAPI can list only the types a
		// body may have, application/json, not its absence).
		clone.Header.Set("Content-Type", "application/json")
	}
	route, params, err := r.FindRoute(clone)
	if errors.Is(err, routers.ErrMethodNotAllowed) {
		return d.checkMethodNotAllowed(clone, resp, respBody)
	}
	if err != nil {
		return fmt.Errorf("no documented operation: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: clone, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("the request the service accepted does not fit: %w", err)
		}
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body:    io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
}

// checkMethodNotAllowed checks the answer to a method that req's path, a
// documented one, does not have: 405, Allow naming the methods the
// document gives the path, and a body in the error shape (none to a HEAD:
// Go's server sends no body to a HEAD, and ValidateResponse checks nothing
// for one).
func (d document) checkMethodNotAllowed(req *http.Request, resp *http.Response, respBody []byte) error {
	if resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("%s is not documented for this path, and was answered %d, not 405", req.Method, resp.StatusCode)
	}
	var documented []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodTrace} {
		probe := req.Clone(context.Background())
		probe.Method = m
		if _, _, err := d.router.FindRoute(probe); err == nil {
			documented = append(documented, m)
		}
	}
	var allow []string
	for _, m := range strings.Split(resp.Header.Get("Allow"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			allow = append(allow, m)
		}
	}
	slices.Sort(allow)
	slices.Sort(documented)
	if !slices.Equal(allow, documented) {
		return fmt.Errorf("405 with Allow %q; the document gives the path %v", resp.Header.Get("Allow"), documented)
	}
	if req.Method == http.MethodHead {
		return nil
	}
	var body any
	if err := json.Unmarshal(respBody, &body); err != nil {
		return fmt.Errorf("405 with a body that is not JSON: %w", err)
	}
	if err := d.doc.Components.Schemas["Error"].Value.VisitJSON(body); err != nil {
		return fmt.Errorf("405 with a body not in the error shape: %w", err)
	}
	return nil
}
