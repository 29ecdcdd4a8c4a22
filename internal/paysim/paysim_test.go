package paysim_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
)

// The simulated provider confirms a payment the first time it is created:
// a webhook signed with its secret, which its own ParseEvent verifies,
// arrives and is answered before Create returns; a second Create of the
// same key is the same payment, confirmed once. A confirmed payment is not
// cancelled; a refund is one per key.
func TestProvider_createConfirmsInASignedWebhook_onceByKey(t *testing.T) {
	p := paysim.New(paysim.Config{Secret: "s3cret-simulated-0123456789abcdef"})
	var mu sync.Mutex
	var got []payment.Event
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := p.ParseEvent(body, r.Header)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	defer srv.Close()
	p.SetWebhookURL(srv.URL)
	ctx := context.Background()
	c := payment.Charge{OrderNo: "7-X", ActivityID: 7, AmountCents: 500, Currency: "cny", Key: payment.ChargeKey("7-X")}
	in, err := p.Create(ctx, c)
	if err != nil || in.Status != payment.Succeeded || in.ClientSecret == "" {
		t.Fatalf("create: %+v, %v", in, err)
	}
	again, err := p.Create(ctx, c)
	if err != nil || again.ID != in.ID {
		t.Fatalf("create again: %+v, %v; want %s", again, err, in.ID)
	}
	if len(got) != 1 || got[0].Kind != payment.PaymentSucceeded || got[0].PaymentID != in.ID || got[0].OrderNo != "7-X" ||
		got[0].AmountCents != 500 || got[0].Currency != "cny" {
		t.Fatalf("webhooks received: %+v; want one confirmation of %s", got, in.ID)
	}
	if err := p.Cancel(ctx, in.ID); !errors.Is(err, payment.ErrNotCancelable) {
		t.Fatalf("cancel of a confirmed payment: %v, want ErrNotCancelable", err)
	}
	r1, err := p.Refund(ctx, in.ID, 500, payment.RefundKey(in.ID))
	r2, _ := p.Refund(ctx, in.ID, 500, payment.RefundKey(in.ID))
	if err != nil || r1 == "" || r1 != r2 {
		t.Fatalf("refunds with one key: %q and %q, %v; want one refund", r1, r2, err)
	}
	if list, _ := p.Payments(ctx, 7, time.Time{}); len(list) != 1 {
		t.Fatalf("payments of the sale: %v", list)
	}
}

// A delivery the api refuses is Create's error, and the payment is
// confirmed by a later Create of the same key.
func TestProvider_webhookRefused_isCreatesError_deliveredAgainLater(t *testing.T) {
	p := paysim.New(paysim.Config{})
	var refuse atomic.Bool
	refuse.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p.SetWebhookURL(srv.URL)
	c := payment.Charge{OrderNo: "7-Y", ActivityID: 7, AmountCents: 500, Currency: "cny", Key: "k"}
	if _, err := p.Create(context.Background(), c); err == nil {
		t.Fatal("a refused webhook: no error")
	}
	refuse.Store(false)
	if in, err := p.Create(context.Background(), c); err != nil || in.Status != payment.Succeeded {
		t.Fatalf("created again: %+v, %v", in, err)
	}
}

// A refused delivery is sent again in the background, as a provider's
// retries are, until acknowledged; and another process's provider with the
// same secret (a pay retried on the other api) names the same payment.
func TestProvider_refusedWebhook_redelivered_sameIDsAcrossProcesses(t *testing.T) {
	const secret = "shared-simulated-secret-0123456789"
	var tries atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) <= 2 {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := paysim.New(paysim.Config{Secret: secret, WebhookURL: srv.URL,
		Redelivery: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}})
	c := payment.Charge{OrderNo: "7-Z", ActivityID: 7, AmountCents: 500, Currency: "cny", Key: "order:7-Z"}
	first, err := p.Create(context.Background(), c)
	if err == nil {
		t.Fatal("a refused webhook: no error")
	}
	deadline := time.Now().Add(5 * time.Second)
	for tries.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := tries.Load(); n != 3 {
		t.Fatalf("%d deliveries, want 3 (refused twice, then acknowledged, then no more)", n)
	}
	time.Sleep(50 * time.Millisecond)
	if n := tries.Load(); n != 3 {
		t.Fatalf("%d deliveries after one was acknowledged, want 3", n)
	}
	other := paysim.New(paysim.Config{Secret: secret})
	in, err := other.Create(context.Background(), c)
	if err != nil || in.ID != first.ID || in.ClientSecret != first.ClientSecret {
		t.Fatalf("the other process's payment: %+v, %v; want %s", in, err, first.ID)
	}
	stranger := paysim.New(paysim.Config{Secret: "another-deployment-secret-0123456789"})
	if in, _ := stranger.Create(context.Background(), c); in.ID == first.ID {
		t.Fatal("a provider with another secret names the same payment")
	}
}

// A refund asked again with its key, here or by another process of the
// deployment (a worker killed mid-refund, then the next), is the same
// refund; Refunds lists one per payment then. A second key is a second
// refund of the payment, and Refunds shows both: what the invariants
// checker looks for.
func TestProvider_refunds_onePerKey_acrossProcesses_listedPerPayment(t *testing.T) {
	const secret = "shared-simulated-secret-0123456789"
	ctx := context.Background()
	worker, next := paysim.New(paysim.Config{Secret: secret}), paysim.New(paysim.Config{Secret: secret})
	key := payment.RefundKey("sim_pi_1")
	first, err := worker.Refund(ctx, "sim_pi_1", 500, key)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := worker.Refund(ctx, "sim_pi_1", 500, key); again != first {
		t.Fatalf("the same key again: %q, want %q", again, first)
	}
	if other, _ := next.Refund(ctx, "sim_pi_1", 500, key); other != first {
		t.Fatalf("the same key in another process: %q, want %q", other, first)
	}
	if list, _ := worker.Refunds(ctx, "sim_pi_1"); len(list) != 1 || list[0] != first {
		t.Fatalf("refunds of the payment: %v, want [%s]", list, first)
	}
	second, _ := worker.Refund(ctx, "sim_pi_1", 500, "another-key")
	if list, _ := worker.Refunds(ctx, "sim_pi_1"); len(list) != 2 || list[1] != second || second == first {
		t.Fatalf("refunds after a second key: %v, want [%s, a second]", list, first)
	}
	if list, _ := worker.Refunds(ctx, "sim_pi_2"); len(list) != 0 {
		t.Fatalf("refunds of a payment never refunded: %v", list)
	}
}

// Two processes' providers writing one refund log (SIMULATED_REFUND_LOG):
// a refund retried under its key in the other process is one refund in
// the log, a second key a second refund — what the soak's checker counts.
func TestRefundLog_countsARefundOnceAcrossProcesses_aSecondKeyTwice(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "refunds.log")
	a := paysim.New(paysim.Config{Secret: "s3cret-s3cret-s3cret-s3cret-s3cret", RefundLog: path})
	b := paysim.New(paysim.Config{Secret: "s3cret-s3cret-s3cret-s3cret-s3cret", RefundLog: path})
	log := paysim.RefundLog(path)
	if got, err := log.Refunds(ctx, "sim_pi_1"); err != nil || len(got) != 0 {
		t.Fatalf("an empty log: %v, %v", got, err)
	}
	first, err := a.Refund(ctx, "sim_pi_1", 500, "flashsale-refund-sim_pi_1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Refund(ctx, "sim_pi_1", 500, "flashsale-refund-sim_pi_1")
	if err != nil || again != first {
		t.Fatalf("the key retried in another process: %q, %v; want %q", again, err, first)
	}
	if got, _ := log.Refunds(ctx, "sim_pi_1"); len(got) != 1 || got[0] != first {
		t.Fatalf("refunds of the payment in the log: %v, want [%s]", got, first)
	}
	if _, err := b.Refund(ctx, "sim_pi_1", 500, "another-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Refund(ctx, "sim_pi_2", 300, "flashsale-refund-sim_pi_2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := log.Refunds(ctx, "sim_pi_1"); len(got) != 2 {
		t.Fatalf("a payment refunded under two keys shows %v, want two refunds", got)
	}
}
