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
// missing, an undocumented status, an unknown path — and a request the
// service accepted that does not fit; it lets documented exchanges and
// refused bad requests through.
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
		default:
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"code":"INVALID_ARGUMENT","message":"quantity is required"}}`)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, path, body string
		bad              string // what the contract must say; "" for nothing
	}{
		{"a documented 202", "/v1/activities/1/orders?answer=order", `{"quantity":1}`, ""},
		{"a bad request refused with 400", "/v1/activities/1/orders?answer=refuse", `{"quantity":"x"}`, ""},
		{"a 202 missing required fields", "/v1/activities/1/orders?answer=partial", `{"quantity":1}`, "property"},
		{"an undocumented status", "/v1/activities/1/orders?answer=teapot", `{"quantity":1}`, "418"},
		{"a request accepted that does not fit", "/v1/activities/1/orders?answer=order", `{"quantity":0}`, "accepted does not fit"},
		{"an undocumented path", "/v1/nowhere?answer=order", ``, "no documented operation"},
	} {
		rec := &recorder{TB: t}
		c := &http.Client{Transport: Contract{T: rec}}
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(tc.body))
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
