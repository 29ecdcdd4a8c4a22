package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The Standard Webhooks headers.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID        // the event's id: the same on every retry
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp // the attempt's time, Unix seconds
	HeaderSignature = standardwebhooks.HeaderWebhookSignature // "v1,<base64>", one per secret, space-separated
)

// Sign returns the signature header of a delivery of body as event id at
// at: the Standard Webhooks scheme (HMAC-SHA256 over "id.timestamp.body"),
// one "v1,…" per secret, made by the spec's own Go library, so that what a
// receiver's library verifies is what we send. During a rotation both
// secrets sign, and a receiver that knows either accepts it (the
// libraries try each signature).
func Sign(id string, at time.Time, body []byte, secrets []string) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", err
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// SetHeaders sets a delivery's three headers on h.
func SetHeaders(h http.Header, id string, at time.Time, body []byte, secrets []string) error {
	sig, err := Sign(id, at, body, secrets)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}
