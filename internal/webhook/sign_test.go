package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/flashsale/flashsale/internal/webhook"
)

// The Standard Webhooks specification's test vector (its libraries share
// it: the Go one's TestWebhookSign): our signature of it is the spec's.
func TestSign_theSpecsTestVector(t *testing.T) {
	got, err := webhook.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`),
		[]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %q, want the spec's %q", got, want)
	}
}

// During a rotation both secrets sign: a receiver holding either verifies
// the delivery with the spec's library; one holding another secret does
// not, nor does anyone once the body changes.
func TestSetHeaders_duringARotation_eitherSecretVerifies(t *testing.T) {
	oldSecret, newSecret, stranger := webhook.NewSecret(), webhook.NewSecret(), webhook.NewSecret()
	if !strings.HasPrefix(newSecret, "whsec_") || newSecret == oldSecret {
		t.Fatalf("secrets %q, %q", oldSecret, newSecret)
	}
	body := []byte(`{"type":"order.paid","timestamp":"2026-12-01T10:00:00.000Z","data":{}}`)
	h := http.Header{}
	if err := webhook.SetHeaders(h, "evt_1", time.Now(), body, []string{newSecret, oldSecret}); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get(webhook.HeaderSignature))); n != 2 {
		t.Fatalf("signature header %q: want two signatures", h.Get(webhook.HeaderSignature))
	}
	verify := func(secret string, b []byte) error {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return wh.Verify(b, h)
	}
	for _, s := range []string{oldSecret, newSecret} {
		if err := verify(s, body); err != nil {
			t.Errorf("a receiver with one of the two secrets refuses: %v", err)
		}
	}
	if verify(stranger, body) == nil {
		t.Error("another secret verifies")
	}
	if verify(newSecret, append([]byte(" "), body...)) == nil {
		t.Error("a changed body verifies")
	}
}
