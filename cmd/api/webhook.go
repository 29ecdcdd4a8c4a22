package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
)

// webhookUsage is `api webhook`'s usage line, in its errors.
const webhookUsage = `usage: api webhook --order NO [--provider stripe|simulated] [--payment ID] [--amount CENTS]
                   [--currency CODE] [--event ID] [--url URL] [--secret SECRET]`

// webhookTimeout bounds each of the command's requests to the api.
const webhookTimeout = 10 * time.Second

// usageError is a command misused (a flag missing or wrong): exit status 2,
// and the usage line.
type usageError struct{ msg, usage string }

func (e usageError) Error() string { return e.msg + "\n" + e.usage }

// notTaken is a webhook the api did not take (an answer other than 2xx, or
// no answer): exit status 1, as a failed request is, not 2, a misuse.
type notTaken struct{ err error }

func (e notTaken) Error() string { return e.err.Error() }
func (e notTaken) Unwrap() error { return e.err }

// webhookEvent is what `api webhook` sends: a payment confirmed, for one
// order.
type webhookEvent struct {
	Provider    string // config.PaymentStripe or config.PaymentSimulated
	ID          string // the event's id: a new one unless --event repeats one
	PaymentID   string
	OrderNo     string
	ActivityID  int64
	AmountCents int64
	Currency    string
}

// runWebhook is `api webhook`: what the Stripe CLI's `stripe trigger`
// gives, for trying the service locally — stripe-mock creates
// PaymentIntents but sends no webhooks, so nothing would ever pay an
// order. It sends the api a payment_intent.succeeded event for an order,
// signed as Stripe signs (Stripe-Signature: t=…,v1=HMAC-SHA256 of
// "t.body", with stripe-go's own webhook package) with the webhook secret,
// and prints the api's answer. The order's payment id and amount are read
// from the admin API (GET /admin/v1/orders/{no}, with ADMIN_TOKEN) unless
// given. With --provider simulated it sends the simulated provider's
// event instead (paysim: a late payment or a replay, in embedded mode).
// The defaults are the api's settings: PAYMENT_PROVIDER, HTTP_ADDR,
// STRIPE_WEBHOOK_SECRET or SIMULATED_WEBHOOK_SECRET, PAYMENT_CURRENCY.
func runWebhook(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error, with the usage line, says it once
	orderNo := fs.String("order", "", "the order the payment pays")
	provider := fs.String("provider", "", "stripe or simulated (default PAYMENT_PROVIDER)")
	paymentID := fs.String("payment", "", "the payment's id (default the order's, from the admin API)")
	amount := fs.Int64("amount", 0, "the amount paid, in cents (default the payment's, from the admin API)")
	currency := fs.String("currency", "", "the currency paid (default the payment's, else PAYMENT_CURRENCY)")
	eventID := fs.String("event", "", "the event's id (default a new one; repeat one to send a replay)")
	base := fs.String("url", "", "the api (default http://127.0.0.1 on HTTP_ADDR's port)")
	secret := fs.String("secret", "", "the webhook secret (default STRIPE_WEBHOOK_SECRET or SIMULATED_WEBHOOK_SECRET)")
	bad := func(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...), webhookUsage} }
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, webhookUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return bad("%v", err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case *orderNo == "":
		return bad("--order is required: the order number the payment pays")
	case given["amount"] && *amount <= 0:
		return bad("--amount %d: want a positive number of cents", *amount)
	case given["currency"] && len(*currency) != 3:
		return bad("--currency %q: want an ISO 4217 code (cny, usd, …)", *currency)
	}
	activityID, err := order.ParseNo(*orderNo)
	if err != nil {
		return bad("--order %q is not an order number (as POST /v1/activities/{id}/orders answered it)", *orderNo)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ev := webhookEvent{Provider: *provider, ID: *eventID, PaymentID: *paymentID, OrderNo: *orderNo,
		ActivityID: activityID, AmountCents: *amount, Currency: strings.ToLower(*currency)}
	if ev.Provider == "" {
		ev.Provider = cfg.PaymentProvider
	}
	if *secret == "" {
		switch ev.Provider {
		case config.PaymentStripe:
			*secret = cfg.StripeWebhookSecret
		case config.PaymentSimulated:
			*secret = cfg.SimulatedWebhookSecret
		}
	}
	switch {
	case ev.Provider == "":
		return bad("--provider is required (PAYMENT_PROVIDER is not set): stripe or simulated, the api's")
	case ev.Provider != config.PaymentStripe && ev.Provider != config.PaymentSimulated:
		return bad("--provider %q: want stripe or simulated", ev.Provider)
	case *secret == "" && ev.Provider == config.PaymentStripe:
		return bad("no webhook secret: give --secret or set STRIPE_WEBHOOK_SECRET, the api's (whsec_…)")
	case *secret == "":
		return bad("no webhook secret: give --secret or set SIMULATED_WEBHOOK_SECRET, the api's " +
			"(an api started without one makes up its own, which nothing outside it can sign with)")
	}
	api, err := apiURL(*base, cfg.HTTPAddr)
	if err != nil {
		return bad("%v", err)
	}
	client := &http.Client{Timeout: webhookTimeout}
	if ev.PaymentID == "" || ev.AmountCents == 0 {
		if cfg.AdminToken == "" {
			return bad("the order's payment and amount are read from the admin API, which needs ADMIN_TOKEN, the api's: " +
				"set it, or give --payment and --amount")
		}
		if err := lookUpPayment(client, api, cfg.AdminToken, &ev); err != nil {
			return notTaken{err}
		}
	}
	if ev.Currency == "" {
		ev.Currency = strings.ToLower(cfg.PaymentCurrency)
	}
	if ev.ID == "" {
		// Stripe's form (evt_ and 24 letters and digits); the simulated
		// provider's ids begin evt_sim_.
		ev.ID = map[string]string{config.PaymentStripe: "evt_", config.PaymentSimulated: "evt_sim_"}[ev.Provider] + randomID(24)
	}
	return sendWebhook(client, api, *secret, ev, stdout)
}

// apiURL is the api's base URL: given (http or https, a host, no query),
// else on the loopback at HTTP_ADDR's port.
func apiURL(given, httpAddr string) (string, error) {
	if given == "" {
		probe, err := health.URL(httpAddr)
		if err != nil {
			return "", fmt.Errorf("HTTP_ADDR %v", err)
		}
		return strings.TrimSuffix(probe, "/healthz"), nil
	}
	u, err := url.Parse(given)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return "", fmt.Errorf("--url %q: want the api's address, e.g. http://127.0.0.1:8080", given)
	}
	return strings.TrimSuffix(given, "/"), nil
}

// lookUpPayment fills in what ev lacks of the order's payment — its id,
// amount and currency — from the admin API's view of the order.
func lookUpPayment(client *http.Client, api, adminToken string, ev *webhookEvent) error {
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	u := api + "/admin/v1/orders/" + url.PathEscape(ev.OrderNo)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reading the order's payment: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized {
			hint = " (ADMIN_TOKEN is not the api's)"
		}
		return fmt.Errorf("reading the order's payment: GET %s answered %s%s: %s", u, resp.Status, hint, bytes.TrimSpace(body))
	}
	var view struct {
		Order struct {
			AmountCents int64 `json:"amount_cents"`
		} `json:"order"`
		PaymentID string `json:"payment_id"`
		Live      *struct {
			ID          string `json:"id"`
			AmountCents int64  `json:"amount_cents"`
			Currency    string `json:"currency"`
		} `json:"live_payment"`
	}
	if err := json.Unmarshal(body, &view); err != nil {
		return fmt.Errorf("reading the order's payment: GET %s: %w", u, err)
	}
	// The live payment is the one the order's pay started; without one
	// (the sale long over, its Redis keys gone) the one that paid it.
	id, amount, currency := view.PaymentID, view.Order.AmountCents, ""
	if view.Live != nil {
		id, amount, currency = view.Live.ID, view.Live.AmountCents, view.Live.Currency
	}
	if ev.PaymentID == "" {
		if id == "" {
			return fmt.Errorf("order %s has no payment: start it first (POST /v1/orders/%s/pay), or give --payment", ev.OrderNo, ev.OrderNo)
		}
		ev.PaymentID = id
	}
	if ev.AmountCents == 0 {
		ev.AmountCents = amount
	}
	if ev.Currency == "" {
		ev.Currency = currency
	}
	return nil
}

// sendWebhook signs ev as its provider does and POSTs it to the api's
// /webhooks/{provider}, printing what was sent and the answer.
func sendWebhook(client *http.Client, api, secret string, ev webhookEvent, stdout io.Writer) error {
	now := time.Now()
	body, header, kind, err := signedEvent(ev, secret, now)
	if err != nil {
		return err
	}
	u := api + "/webhooks/" + ev.Provider
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header[0], header[1])
	fmt.Fprintf(stdout, "POST %s: %s %s, payment %s of order %s, %d %s\n",
		u, kind, ev.ID, ev.PaymentID, ev.OrderNo, ev.AmountCents, ev.Currency)
	resp, err := client.Do(req)
	if err != nil {
		return notTaken{fmt.Errorf("webhook: %w", err)}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Fprintf(stdout, "%s %s\n", resp.Status, bytes.TrimSpace(answer))
	if resp.StatusCode/100 != 2 {
		return notTaken{fmt.Errorf("webhook: the api answered %s", resp.Status)}
	}
	return nil
}

// signedEvent is ev's body as its provider sends it, its signature header
// (name, value), and the event's type.
func signedEvent(ev webhookEvent, secret string, now time.Time) (body []byte, header [2]string, kind string, err error) {
	switch ev.Provider {
	case config.PaymentStripe:
		kind = "payment_intent.succeeded"
		body, err = json.Marshal(stripeEventOf(ev, kind, now))
		header = [2]string{"Stripe-Signature", webhook.GenerateTestSignedPayload(
			&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now}).Header}
	default: // simulated
		kind = string(payment.PaymentSucceeded)
		body, err = json.Marshal(paysim.Event{ID: ev.ID, Type: kind, PaymentID: ev.PaymentID, OrderNo: ev.OrderNo,
			AmountCents: ev.AmountCents, Currency: ev.Currency, Created: now.Unix()})
		header = [2]string{paysim.SignatureHeader, paysim.Sign(body, secret, now)}
	}
	return body, header, kind, err
}

// stripeEvent is an event as Stripe sends it to a webhook endpoint, with
// the fields its consumers read (the service's: stripepay.ParseEvent reads
// the type and the PaymentIntent's id, amounts, currency and metadata).
type stripeEvent struct {
	ID              string `json:"id"`
	Object          string `json:"object"` // "event"
	APIVersion      string `json:"api_version"`
	Created         int64  `json:"created"`
	Livemode        bool   `json:"livemode"`
	PendingWebhooks int    `json:"pending_webhooks"`
	Type            string `json:"type"`
	Data            struct {
		Object stripePaymentIntent `json:"object"`
	} `json:"data"`
}

// stripePaymentIntent is a PaymentIntent as an event carries it.
type stripePaymentIntent struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"` // "payment_intent"
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
}

// stripeEventOf is ev as Stripe's event of type kind: the PaymentIntent
// succeeded, its whole amount received, and the metadata the service gave
// it when it created it (stripepay.Provider.Create: order_no, activity_id).
func stripeEventOf(ev webhookEvent, kind string, now time.Time) stripeEvent {
	e := stripeEvent{ID: ev.ID, Object: "event", APIVersion: stripe.APIVersion, Created: now.Unix(), PendingWebhooks: 1, Type: kind}
	e.Data.Object = stripePaymentIntent{ID: ev.PaymentID, Object: "payment_intent", Amount: ev.AmountCents,
		AmountReceived: ev.AmountCents, Currency: ev.Currency, Status: string(stripe.PaymentIntentStatusSucceeded),
		Metadata: map[string]string{"order_no": ev.OrderNo, "activity_id": strconv.FormatInt(ev.ActivityID, 10)}}
	return e
}

// randomID is n random letters and digits, as Stripe's ids are made of.
func randomID(n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
