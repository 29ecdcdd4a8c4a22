package stripepay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/stripepay"
	"github.com/flashsale/flashsale/internal/testenv"
)

// A refund asked again after Stripe's 24 hours of idempotency — its key
// forgotten — of a PaymentIntent refunded already is refused with
// charge_already_refunded; the money is back, so Refund answers the refund
// that stands, read from Stripe's list of the PaymentIntent's refunds.
// stripe-mock keeps no state and never refuses so: this test's server
// answers that one refusal itself and passes every other request to
// stripe-mock, which validates the list request and answers it.
func TestProvider_refundAfterTheKeyExpired_chargeAlreadyRefunded_answersTheRefundThatStands(t *testing.T) {
	mock := testenv.StartStripeMock(t)
	upstream, err := url.Parse(mock.URL)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","code":"charge_already_refunded",` +
				`"message":"Charge ch_1 has already been refunded."}}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := stripepay.New(stripepay.Config{SecretKey: "sk_test_123", APIURL: srv.URL})
	ctx := context.Background()

	standing, err := p.Refunds(ctx, "pi_refunded")
	if err != nil || len(standing) == 0 {
		t.Fatalf("stripe-mock's refunds of the PaymentIntent: %v, %v", standing, err)
	}
	id, err := p.Refund(ctx, "pi_refunded", 500, payment.RefundKey("pi_refunded"))
	if err != nil {
		t.Fatalf("a refund of a PaymentIntent refunded already: %v, want its refund", err)
	}
	if id != standing[len(standing)-1] || refused.Load() != 1 {
		t.Fatalf("answered %q after %d refusals, want %q after 1", id, refused.Load(), standing[len(standing)-1])
	}
}
