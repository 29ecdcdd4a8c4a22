package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Contract reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// The contract catches an answer that strays from the document — a field
// missing, an undocumented status, an unknown path, a required header
// missing, a 405 whose Allow is not the path's documented methods or an
// undocumented method not answered 405 — and a request the service
// accepted that does not fit; it lets documented exchanges and refused bad
// requests through.
func TestContract_catchesWhatStraysFromTheDocument(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("answer") {
		case "order":
			w.WriteHeader(202)
			fmt.Fprint(w, `{"order_no":"1-0CF3YH0AB7J8Q2RS","activity_id":1,"quantity":1,"price_cents":1,"amount_cents":1,`+
				`"status":"pending_payment","created_at":"2026-11-23T10:00:00Z","persisted":false}`)
		case "partial":
			w.WriteHeader(202)
			fmt.Fprint(w, `{"order_no":"1-0CF3YH0AB7J8Q2RS"}`)
		case "teapot":
			w.WriteHeader(418)
			fmt.Fprint(w, `{}`)
		case "405":
			w.Header().Set("Allow", r.URL.Query().Get("allow"))
			w.WriteHeader(405)
			fmt.Fprint(w, `{"error":{"code":"METHOD_NOT_ALLOWED","message":"no"}}`)
		case "503":
			if r.URL.Query().Has("retry") {
				w.Header().Set("Retry-After", r.URL.Query().Get("retry"))
			}
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"code":"UNAVAILABLE","message":"try again"}}`)
		default:
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"code":"INVALID_ARGUMENT","message":"quantity is required"}}`)
		}
	}))
	defer srv.Close()
	const order = "/v1/orders/1-0CF3YH0AB7J8Q2RS"
	for _, tc := range []struct {
		name, method, path, body string
		bad                      string // what the contract must say; "" for nothing
	}{
		{"a documented 202", "POST", "/v1/activities/1/orders?answer=order", `{"quantity":1}`, ""},
		{"a bad request refused with 400", "POST", "/v1/activities/1/orders?answer=refuse", `{"quantity":"x"}`, ""},
		{"a 202 missing required fields", "POST", "/v1/activities/1/orders?answer=partial", `{"quantity":1}`, "property"},
		{"an undocumented status", "POST", "/v1/activities/1/orders?answer=teapot", `{"quantity":1}`, "418"},
		{"a request accepted that does not fit", "POST", "/v1/activities/1/orders?answer=order", `{"quantity":0}`, "accepted does not fit"},
		{"an undocumented path", "POST", "/v1/nowhere?answer=order", ``, "no documented operation"},
		{"a 503 with Retry-After", "POST", "/v1/activities/1/orders?answer=503&retry=1", `{"quantity":1}`, ""},
		{"a 503 without Retry-After", "POST", "/v1/activities/1/orders?answer=503", `{"quantity":1}`, `"Retry-After" missing`},
		{"a 405 naming the path's methods", "DELETE", order + "?answer=405&allow=GET", ``, ""},
		{"a 405 to a HEAD", "HEAD", "/healthz?answer=405&allow=GET", ``, ""},
		{"a 405 of a path of two methods", "PUT", "/v1/activities/1/groups?answer=405&allow=POST,+GET", ``, ""},
		{"a 405 naming a method the path has not", "DELETE", order + "?answer=405&allow=GET,+POST", ``, "Allow"},
		{"a 405 without Allow", "DELETE", order + "?answer=405", ``, "Allow"},
		{"an undocumented method not refused with 405", "DELETE", order + "?answer=order", ``, "not 405"},
	} {
		rec := &recorder{TB: t}
		c := &http.Client{Transport: Contract{T: rec}}
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer x")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case tc.bad == "" && len(rec.errs) > 0:
			t.Errorf("%s: reported %v", tc.name, rec.errs)
		case tc.bad != "" && (len(rec.errs) != 1 || !strings.Contains(rec.errs[0], tc.bad)):
			t.Errorf("%s: reported %v, want one report saying %q", tc.name, rec.errs, tc.bad)
		}
	}
}

// An answer cut off mid-body (a server killed while it answered) reaches
// the caller as a transport error, as it would without the contract, and
// is not reported as a mismatch.
func TestContract_answerCutOff_isATransportError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		w.WriteHeader(200)
		fmt.Fprint(w, `{"order_no":"1-0CF3`)
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	rec := &recorder{TB: t}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/orders/1-0CF3YH0AB7J8Q2RS/pay", nil)
	req.Header.Set("Authorization", "Bearer x")
	resp, err := (&http.Client{Transport: Contract{T: rec}}).Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a cut-off answer came back as %d with no error", resp.StatusCode)
	}
	if len(rec.errs) > 0 {
		t.Fatalf("reported %v", rec.errs)
	}
}
