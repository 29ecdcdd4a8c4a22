// Package apitest holds the API's OpenAPI document to account in tests:
// Contract is an http.RoundTripper that checks every exchange of a test's
// client against internal/httpapi/openapi.yaml, so the document cannot
// drift from what the service does.
package apitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/flashsale/flashsale/internal/httpapi"
)

// contract is the OpenAPI document, loaded once for every end-to-end test.
var contract = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPIYAML)
	if err != nil {
		return nil, err
	}
	doc.Servers = nil // match any host: the tests' servers listen on random ports
	return legacy.NewRouter(doc)
})

// Contract is an http.RoundTripper that checks every exchange against the
// OpenAPI document and reports a mismatch to T: each answer's status is
// documented for its operation and its body fits the schema; a request the
// service accepted (2xx) fits too. (A request it refused may be malformed
// on purpose: the bad-input tests send such.)
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
	r, err := contract()
	if err != nil {
		return err
	}
	clone := req.Clone(context.Background())
	clone.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && clone.Header.Get("Content-Type") == "" {
		// The service reads a body sent with no Content-Type as JSON (the
		// document says so in words: OpenAPI can list only the types a
		// body may have, application/json, not its absence).
		clone.Header.Set("Content-Type", "application/json")
	}
	route, params, err := r.FindRoute(clone)
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
