package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// StripeRequest is one request to Stripe's API as a StripeRecorder saw
// it, with the answer it was given.
type StripeRequest struct {
	Method, Path   string
	IdempotencyKey string
	// Form is the request's form body (Stripe's API takes its parameters
	// form-encoded): "amount", "currency", "metadata[order_no]", …
	Form   url.Values
	Status int // the answer's status code
}

// StripeRecorder is an HTTP proxy in front of a stripe-mock that records
// every request it passes on: what the tests read to see what was asked
// of Stripe, since stripe-mock keeps no state. Point STRIPE_API_URL (or
// stripepay.Config.APIURL) at its URL; the processes under test, in this
// process or their own, reach Stripe through it.
type StripeRecorder struct {
	URL string

	upstream string
	mu       sync.Mutex
	reqs     []StripeRequest
	answered func(StripeRequest)
}

// Recorder starts a StripeRecorder in front of m, closed when the test
// ends.
func (m *StripeMock) Recorder(t testing.TB) *StripeRecorder {
	t.Helper()
	r := &StripeRecorder{upstream: m.URL}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// OnAnswered sets f to run on each request once stripe-mock has answered
// it and before the answer is passed back: the moment to kill the process
// that asked (the request done at the provider, its answer never read).
func (r *StripeRecorder) OnAnswered(f func(StripeRequest)) {
	r.mu.Lock()
	r.answered = f
	r.mu.Unlock()
}

// Requests returns the requests so far whose "METHOD /path" starts with
// prefix ("" for every one), oldest first.
func (r *StripeRecorder) Requests(prefix string) []StripeRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []StripeRequest
	for _, q := range r.reqs {
		if strings.HasPrefix(q.Method+" "+q.Path, prefix) {
			out = append(out, q)
		}
	}
	return out
}

func (r *StripeRecorder) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	form, _ := url.ParseQuery(string(body))
	if req.Method == http.MethodGet {
		form = req.URL.Query()
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, r.upstream+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = req.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	q := StripeRequest{Method: req.Method, Path: req.URL.Path, IdempotencyKey: req.Header.Get("Idempotency-Key"),
		Form: form, Status: resp.StatusCode}
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	answered := r.answered
	r.mu.Unlock()
	if answered != nil {
		answered(q)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
