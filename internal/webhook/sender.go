package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Sender makes delivery attempts over HTTP: a POST of the event's body,
// signed, through a dialer that refuses addresses that are not public
// (Guard.Control), with no proxy from the environment and no redirect
// followed (a 3xx is not a 2xx, and following it would leave the guard's
// check of the endpoint's URL behind).
type Sender struct {
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
}

// SenderConfig tunes a Sender; the zero value gives the defaults in the
// comments.
type SenderConfig struct {
	// Timeout bounds an attempt, from dialling to the answer's status line
	// (WEBHOOK_TIMEOUT). Default 10s.
	Timeout time.Duration
	// Guard refuses private addresses at connect time.
	Guard Guard
	// Now is the clock of the signature's timestamp. Default time.Now.
	Now func() time.Time
}

// UserAgent is what deliveries say they are.
const UserAgent = "flashsale-webhooks/1"

// NewSender returns a Sender.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: cfg.Guard.Control}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy's address is what Control would check, not the endpoint's
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   32, // above WEBHOOK_ENDPOINT_CONCURRENCY's default: connections are reused
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &Sender{
		client: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		timeout: cfg.Timeout, now: cfg.Now,
	}
}

// maxAnswer is how much of an answer's body is read (and dropped), so the
// connection can be reused; a longer answer closes it.
const maxAnswer = 64 << 10

// Send makes one attempt of d to ep: its HTTP status (0 when no answer
// came), how long the answer took, and nil when it was a 2xx, else why not.
func (s *Sender) Send(ctx context.Context, ep Endpoint, d Delivery) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if err := SetHeaders(req.Header, d.EventID, s.now(), d.Body, ep.Secrets(s.now())); err != nil {
		return 0, 0, fmt.Errorf("sign: %w", err)
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	latency := time.Since(start)
	if err != nil {
		return 0, latency, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, latency, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return resp.StatusCode, latency, nil
}
