// Package paysim is a simulated payment provider (payment.Provider) for
// the places no real one can be: embedded mode (make run), the load-test
// kit and the fault soak. It plays the provider's part through the same
// port as Stripe's adapter: a payment is created, and — as if the shopper
// paid at once — confirmed in a webhook it signs (Stripe's scheme,
// HMAC-SHA256 of the timestamp and body, with its own secret) and sends
// over HTTP to the api's POST /webhooks/simulated, before Create returns.
// So the order is paid the way a real payment pays it (the webhook, the
// transition, the acknowledgement), and `pay` answers paid. It moves no
// money: the api refuses to start with it against real servers unless
// PAYMENT_PROVIDER=simulated says so (config).
//
// Its state (payments, refunds) is the process's own memory. A refund is
// made once per key, as a provider's idempotency does, and its id follows
// from the key, so a refund retried by another process of the deployment
// (a worker killed mid-refund, then another) names the same refund; a
// process that asks for a refund of a payment another process created
// (the worker, the api's) is answered as if it knew it: there is no money
// to check. Refunds lists the refunds made of a payment, as a provider's
// own record would: what the invariants checker asks to see a payment
// refunded twice.
package paysim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/flashsale/flashsale/internal/payment"
)

// SignatureHeader carries a simulated webhook's signature: "t=<unix
// seconds>,v1=<hex HMAC-SHA256>", Stripe's form.
const SignatureHeader = "Simulated-Signature"

// Config tunes a Provider. The zero value gives the defaults in the
// comments.
type Config struct {
	// Secret signs and verifies the webhooks (SIMULATED_WEBHOOK_SECRET).
	// Default: 32 random bytes, hex: a process's own.
	Secret string
	// WebhookURL is where confirmations go (the api's
	// /webhooks/simulated); empty: none is sent (SetWebhookURL sets it
	// once the api listens). A worker's provider sends none.
	WebhookURL string
	// Tolerance is how old a webhook's timestamp may be. Default 5 min.
	Tolerance time.Duration
	// HTTPClient sends the webhooks. Default: one with a 5 s timeout.
	HTTPClient *http.Client
	// RefundLog, when set, is a file each refund this process makes is
	// appended to, one line "<payment> <refund> <key>"
	// (SIMULATED_REFUND_LOG): every process of a deployment writing one
	// file, RefundLog reads a payment's refunds across them.
	RefundLog string
	// Redelivery is when a webhook not acknowledged is sent again, after
	// the first try: a real provider's retries (Stripe's go on for three
	// days), compressed. Default: after 1, 2, 4, 8, 16 and 30 s. They die
	// with the process, as a provider's would not: the worker's backstop
	// (payment.Service.Settle) covers that.
	Redelivery []time.Duration
}

// Provider is the simulated provider.
type Provider struct {
	cfg Config

	mu       sync.Mutex
	url      string
	payments map[string]*payment.Intent // by id
	byKey    map[string]string          // charge key → payment id
	refunds  map[string]string          // refund key → refund id
	refunded map[string][]string        // payment id → its refunds' ids, oldest first
	activity map[string]int64           // payment id → activity
}

var _ payment.Provider = (*Provider)(nil)

// New returns a simulated provider.
func New(cfg Config) *Provider {
	if cfg.Secret == "" {
		cfg.Secret = randomHex(32)
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = webhook.DefaultTolerance
	}
	if cfg.Redelivery == nil {
		cfg.Redelivery = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	return &Provider{cfg: cfg, url: cfg.WebhookURL, payments: map[string]*payment.Intent{}, byKey: map[string]string{},
		refunds: map[string]string{}, refunded: map[string][]string{}, activity: map[string]int64{}}
}

// SetWebhookURL sets where confirmations go (the api's address is known
// once it listens).
func (p *Provider) SetWebhookURL(url string) {
	p.mu.Lock()
	p.url = url
	p.mu.Unlock()
}

// Name is "simulated": webhooks come to POST /webhooks/simulated.
func (p *Provider) Name() string { return "simulated" }

// Create creates the payment (or returns the one c.Key created) and, while
// it is not confirmed, confirms it: the webhook is delivered, and
// answered, before Create returns. A delivery that fails is Create's
// error, and is sent again in the background (Redelivery); the payment
// stays created, and a Create with the same key delivers it again.
func (p *Provider) Create(ctx context.Context, c payment.Charge) (payment.Intent, error) {
	p.mu.Lock()
	in, ok := p.payments[p.byKey[c.Key]]
	if !ok {
		// The ids follow from the key: a pay retried on another api (this
		// one's memory does not know the first) names the same payment.
		in = &payment.Intent{ID: "sim_pi_" + p.keyHex(c.Key, "id"), ClientSecret: "sim_secret_" + p.keyHex(c.Key, "secret"),
			AmountCents: c.AmountCents, Currency: c.Currency, Status: payment.Pending, OrderNo: c.OrderNo}
		p.payments[in.ID], p.byKey[c.Key], p.activity[in.ID] = in, in.ID, c.ActivityID
	}
	out, url := *in, p.url
	p.mu.Unlock()
	if out.Status != payment.Pending || url == "" {
		return out, nil
	}
	ev := Event{ID: "evt_sim_" + randomHex(12), Type: string(payment.PaymentSucceeded), PaymentID: out.ID,
		OrderNo: out.OrderNo, AmountCents: out.AmountCents, Currency: out.Currency, Created: time.Now().Unix()}
	if err := p.Deliver(ctx, url, ev); err != nil {
		go p.redeliver(url, ev) // Create's error stands: the caller may try again too
		return out, err
	}
	p.mu.Lock()
	if in.Status == payment.Pending {
		in.Status = payment.Succeeded
	}
	out = *in
	p.mu.Unlock()
	return out, nil
}

// Cancel cancels a payment not yet confirmed; a confirmed one is
// payment.ErrNotCancelable. An unknown one (another process's) is
// cancelled as far as this one knows.
func (p *Provider) Cancel(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	in, ok := p.payments[id]
	if !ok {
		return nil
	}
	if in.Status == payment.Succeeded {
		return payment.ErrNotCancelable
	}
	in.Status = payment.Canceled
	return nil
}

// Refund makes the refund once per key and returns its id, the same for
// the same key in any process with the same secret.
func (p *Provider) Refund(_ context.Context, paymentID string, _ int64, key string) (string, error) {
	if paymentID == "" {
		return "", errors.New("paysim: refund of no payment")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.refunds[key]
	if !ok {
		id = "sim_re_" + p.keyHex(key, "refund")
		if err := p.logRefund(paymentID, id, key); err != nil {
			return "", err
		}
		p.refunds[key] = id
		p.refunded[paymentID] = append(p.refunded[paymentID], id)
	}
	return id, nil
}

// logRefund appends a refund to Config.RefundLog, if set: one write of one
// line (O_APPEND), whole, beside other processes' lines.
func (p *Provider) logRefund(paymentID, refundID, key string) error {
	if p.cfg.RefundLog == "" {
		return nil
	}
	f, err := os.OpenFile(p.cfg.RefundLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("paysim: refund log: %w", err)
	}
	_, err = f.WriteString(paymentID + " " + refundID + " " + key + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("paysim: refund log: %w", err)
	}
	return nil
}

// RefundLog is a refund log many processes' providers wrote
// (Config.RefundLog), read as the provider's own record of refunds
// (invariants.ProviderRefunds).
type RefundLog string

// Refunds returns the distinct refunds made of payment paymentID by any
// process that wrote the log, in the order first written: one refund
// retried under its key in two processes is one, a second key another.
// It reads the whole log: for many payments, Read it once.
func (l RefundLog) Refunds(ctx context.Context, paymentID string) ([]string, error) {
	all, err := l.Read()
	if err != nil {
		return nil, err
	}
	return all.Refunds(ctx, paymentID)
}

// Read reads the log once: every payment's distinct refunds (Refunds).
func (l RefundLog) Read() (LoggedRefunds, error) {
	raw, err := os.ReadFile(string(l))
	if errors.Is(err, os.ErrNotExist) {
		return LoggedRefunds{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("paysim: refund log: %w", err)
	}
	out := LoggedRefunds{}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && !seen[f[0]+" "+f[1]] {
			seen[f[0]+" "+f[1]] = true
			out[f[0]] = append(out[f[0]], f[1])
		}
	}
	return out, nil
}

// LoggedRefunds is a refund log as read: payment id → its distinct
// refunds, in the order first written.
type LoggedRefunds map[string][]string

// Refunds returns payment paymentID's refunds (invariants.ProviderRefunds).
func (r LoggedRefunds) Refunds(_ context.Context, paymentID string) ([]string, error) {
	return r[paymentID], nil
}

// Refunds returns the ids of the refunds this process made of payment
// paymentID, oldest first: more than one is the payment refunded twice
// (asked with two keys).
func (p *Provider) Refunds(_ context.Context, paymentID string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refunded[paymentID]...), nil
}

// Payments lists this process's payments of activityID (since is not
// kept: every one is listed).
func (p *Provider) Payments(_ context.Context, activityID int64, _ time.Time) ([]payment.Intent, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []payment.Intent
	for id, in := range p.payments {
		if p.activity[id] == activityID {
			out = append(out, *in)
		}
	}
	return out, nil
}

// Event is a simulated webhook's body.
type Event struct {
	ID          string `json:"id"`
	Type        string `json:"type"` // a payment.EventKind
	PaymentID   string `json:"payment_id"`
	OrderNo     string `json:"order_no"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Created     int64  `json:"created"` // unix seconds
}

// ParseEvent verifies a simulated webhook (SignatureHeader, within the
// tolerance) and reads it.
func (p *Provider) ParseEvent(payload []byte, header http.Header) (payment.Event, error) {
	if err := webhook.ValidatePayloadWithTolerance(payload, header.Get(SignatureHeader), p.cfg.Secret, p.cfg.Tolerance); err != nil {
		return payment.Event{}, fmt.Errorf("%w: %w", payment.ErrBadSignature, err)
	}
	var e Event
	if err := json.Unmarshal(payload, &e); err != nil || e.ID == "" {
		return payment.Event{}, fmt.Errorf("%w: not a simulated event", payment.ErrBadEvent)
	}
	kind := payment.EventKind(e.Type)
	switch kind {
	case payment.PaymentSucceeded, payment.PaymentFailed, payment.PaymentCanceled:
		if e.PaymentID == "" {
			return payment.Event{}, fmt.Errorf("%w: %s names no payment", payment.ErrBadEvent, e.Type)
		}
	default:
		kind = payment.Other
	}
	return payment.Event{ID: e.ID, Kind: kind, PaymentID: e.PaymentID, OrderNo: e.OrderNo, AmountCents: e.AmountCents,
		Currency: e.Currency, Created: time.Unix(e.Created, 0).UTC()}, nil
}

// Deliver signs ev and posts it to url, as the provider would: an answer
// other than 2xx is an error. Tests and the soak use it to send late
// payments and replays.
func (p *Provider) Deliver(ctx context.Context, url string, ev Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(body, p.cfg.Secret, time.Now()))
	resp, err := p.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("paysim: webhook: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("paysim: webhook answered %d: %s", resp.StatusCode, msg)
	}
	// The answer read to its end, so that the client keeps the connection
	// for the next delivery: closed unread, Go's transport drops it, and
	// every webhook paid for a new TCP connection on both sides (a tenth of
	// the api's CPU in the bench's profile, 2026-11-29).
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return nil
}

// redeliver sends ev again on the Config.Redelivery schedule until it is
// acknowledged, then marks its payment confirmed.
func (p *Provider) redeliver(url string, ev Event) {
	for _, d := range p.cfg.Redelivery {
		time.Sleep(d)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.Deliver(ctx, url, ev)
		cancel()
		if err == nil {
			p.mu.Lock()
			if in := p.payments[ev.PaymentID]; in != nil && in.Status == payment.Pending {
				in.Status = payment.Succeeded
			}
			p.mu.Unlock()
			return
		}
	}
}

// Sign is the signature header of body signed with secret at t.
func Sign(body []byte, secret string, t time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: t}).Header
}

// keyHex is 12 bytes, hex, that follow from key, what and the secret (the
// apis of one deployment share it, outsiders do not know it).
func (p *Provider) keyHex(key, what string) string {
	sum := sha256.Sum256([]byte(p.cfg.Secret + "\x00" + what + "\x00" + key))
	return hex.EncodeToString(sum[:12])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
