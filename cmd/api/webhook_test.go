package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/testenv"
)

const (
	adminToken    = "test-admin-token-0123456789abcdef"
	stripeSecret  = "whsec_test_0123456789abcdef0123456789"
	simulatedKey  = "test-simulated-secret-0123456789abcdef"
	orderOfSale42 = "42-06H0J68TSYHN2J2MDXSS60AGDR"
)

// shop is an api started as its own process for these tests, and the
// requests a shopper and an admin send it.
type shop struct {
	t      *testing.T
	base   string
	tokens *auth.Tokens
}

// startShop starts the real binary serving on testenv's Redis and MariaDB
// with env's payment settings, and creates and publishes a running sale
// of 10 units at 5.00, returning its id.
func startShop(t *testing.T, test string, env ...string) (*shop, int64) {
	t.Helper()
	addr := testenv.FreeAddr(t)
	env = append([]string{"HTTP_ADDR=" + addr, "REDIS_URL=" + testenv.StartRedis(t).URL(), "MYSQL_DSN=" + testenv.MySQL(t),
		"JWT_SECRET=" + jwtSecret, "ADMIN_TOKEN=" + adminToken, "LOG_LEVEL=warn", "API_ARGS="}, env...)
	c := testenv.StartChild(t, test, "api", env...)
	c.WaitHTTP(t, "http://"+addr+"/healthz", 60*time.Second)
	testenv.WaitReady(t, "http://"+addr+"/readyz", 60*time.Second)
	tokens, _ := auth.New(jwtSecret)
	s := &shop{t: t, base: "http://" + addr, tokens: tokens}
	start, end := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	code, act := s.call("POST", "/admin/v1/activities", "Bearer "+adminToken, fmt.Sprintf(`{"type":"seckill","name":"webhook",
		"sku":"WH","price_cents":500,"total_stock":10,"per_user_limit":2,"starts_at":%q,"ends_at":%q,"payment_ttl_seconds":600}`, start, end))
	if code != 201 {
		t.Fatalf("create the sale: %d %v", code, act)
	}
	id := int64(act["id"].(float64))
	if code, body := s.call("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), "Bearer "+adminToken, ""); code != 200 {
		t.Fatalf("publish the sale: %d %v", code, body)
	}
	return s, id
}

// call sends a request; auth is the whole Authorization header.
func (s *shop) call(method, path, auth, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s %s: %d, body %q is not JSON", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// user calls as shopper id.
func (s *shop) user(id int64, method, path, body string) (int, map[string]any) {
	s.t.Helper()
	tok, err := s.tokens.Issue(id, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.call(method, path, "Bearer "+tok, body)
}

// order places user 1's order of 2 units (10.00) in sale act.
func (s *shop) order(act int64) string {
	s.t.Helper()
	code, o := s.user(1, "POST", fmt.Sprintf("/v1/activities/%d/orders", act), `{"quantity":2}`)
	if code != 202 {
		s.t.Fatalf("order: %d %v", code, o)
	}
	return o["order_no"].(string)
}

func (s *shop) status(no string) string {
	s.t.Helper()
	_, o := s.user(1, "GET", "/v1/orders/"+no, "")
	st, _ := o["status"].(string)
	return st
}

// Stripe, locally, end to end: stripe-mock creates the PaymentIntent when
// the order's pay starts it, and sends no webhook; `api webhook --order
// NO`, run as the docs run it (the api's settings in its environment:
// HTTP_ADDR, ADMIN_TOKEN, PAYMENT_PROVIDER, STRIPE_WEBHOOK_SECRET), reads
// the order's payment from the admin API, signs Stripe's event and sends
// it, and the order is paid by that payment. Signed with another secret,
// the event is refused with the webhook's 400, the command exits 1, and
// the order stays unpaid.
func TestAPI_webhookCommand_stripe_paysTheOrderWhoseIntentStripeMockCreated(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	const test = "TestAPI_webhookCommand_stripe_paysTheOrderWhoseIntentStripeMockCreated"
	mock := testenv.StartStripeMock(t)
	stripeEnv := []string{"PAYMENT_PROVIDER=stripe", "STRIPE_API_URL=" + mock.URL, "STRIPE_SECRET_KEY=sk_test_local",
		"STRIPE_WEBHOOK_SECRET=" + stripeSecret}
	s, act := startShop(t, test, stripeEnv...)
	no := s.order(act)
	code, p := s.user(1, "POST", "/v1/orders/"+no+"/pay", "")
	pi, _ := p["payment_id"].(string)
	if code != 200 || p["status"] != "pending_payment" || p["provider"] != "stripe" || !strings.HasPrefix(pi, "pi_") {
		t.Fatalf("pay: %d %v; want a PaymentIntent started, the order unpaid", code, p)
	}
	webhook := func(args string) (int, string) {
		env := append([]string{"API_ARGS=webhook " + args, "HTTP_ADDR=" + strings.TrimPrefix(s.base, "http://"),
			"ADMIN_TOKEN=" + adminToken}, stripeEnv...)
		return testenv.RunChild(t, test, "api", env...)
	}

	exit, out := webhook("--order " + no + " --secret whsec_not_the_apis")
	if exit != 1 || !strings.Contains(out, "400 Bad Request") || !strings.Contains(out, "INVALID_SIGNATURE") {
		t.Fatalf("signed with another secret: exit %d\n%s\nwant exit 1 and the webhook's 400 INVALID_SIGNATURE", exit, out)
	}
	if st := s.status(no); st != "pending_payment" {
		t.Fatalf("the order after a webhook of another secret: %s, want pending_payment", st)
	}

	exit, out = webhook("--order " + no)
	sent := fmt.Sprintf("POST %s/webhooks/stripe: payment_intent.succeeded evt_", s.base)
	if exit != 0 || !strings.Contains(out, sent) || !strings.Contains(out, fmt.Sprintf("payment %s of order %s, 1000 cny", pi, no)) ||
		!strings.Contains(out, `200 OK {"received":true}`) {
		t.Fatalf("api webhook --order %s: exit %d\n%s\nwant the event sent for %s, 1000 cny, and 200", no, exit, out, pi)
	}
	if st := s.status(no); st != "paid" {
		t.Fatalf("the order after the webhook: %s, want paid", st)
	}
	if code, v := s.call("GET", "/admin/v1/orders/"+no, "Bearer "+adminToken, ""); code != 200 || v["payment_id"] != pi {
		t.Fatalf("the admin's view of the order: %d %v; want it paid by %s", code, v, pi)
	}
}

// The simulated provider's variant (embedded mode's): an order never paid
// through pay is paid by the simulated provider's event the command signs
// with SIMULATED_WEBHOOK_SECRET, its payment and amount given, so no
// admin token is needed; called as a function.
func TestAPI_webhookCommand_simulated_paysAnOrderWithTheGivenPayment(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	s, act := startShop(t, "TestAPI_webhookCommand_simulated_paysAnOrderWithTheGivenPayment",
		"PAYMENT_PROVIDER=simulated", "SIMULATED_WEBHOOK_SECRET="+simulatedKey)
	no := s.order(act)
	for _, k := range []string{"PAYMENT_PROVIDER", "ADMIN_TOKEN", "SIMULATED_WEBHOOK_SECRET", "HTTP_ADDR"} {
		t.Setenv(k, "")
	}
	var out bytes.Buffer
	err := runWebhook([]string{"--provider", "simulated", "--secret", simulatedKey, "--url", s.base + "/",
		"--order", no, "--payment", "sim_pi_local", "--amount", "1000"}, &out)
	if err != nil || !strings.Contains(out.String(), "payment_succeeded evt_sim_") || !strings.Contains(out.String(), `200 OK {"received":true}`) {
		t.Fatalf("api webhook --provider simulated: %v\n%s", err, out.String())
	}
	if st := s.status(no); st != "paid" {
		t.Fatalf("the order after the simulated webhook: %s, want paid", st)
	}
}

// Each misuse is named, with the usage line, and exits 2 (a refused
// webhook exits 1): a missing or malformed flag, a provider, secret or
// address the command cannot use, an order number that is none.
func TestWebhook_badFlags_areNamedWithTheUsageLine_exit2(t *testing.T) {
	for _, k := range []string{"PAYMENT_PROVIDER", "ADMIN_TOKEN", "STRIPE_WEBHOOK_SECRET", "SIMULATED_WEBHOOK_SECRET", "HTTP_ADDR"} {
		t.Setenv(k, "")
	}
	stripe := "--provider stripe --secret whsec_x --order " + orderOfSale42
	for _, tc := range []struct {
		args, env, want string
	}{
		{"", "", "--order is required"},
		{"--order", "", "flag needs an argument: -order"},
		{"--nope 1 --order " + orderOfSale42, "", "flag provided but not defined: -nope"},
		{"--order " + orderOfSale42 + " extra", "", `unexpected argument "extra"`},
		{"--order 42", "", `--order "42" is not an order number`},
		{"--order " + orderOfSale42, "", "--provider is required (PAYMENT_PROVIDER is not set)"},
		{"--provider paypal --order " + orderOfSale42, "", `--provider "paypal": want stripe or simulated`},
		{"--order " + orderOfSale42, "PAYMENT_PROVIDER=stripe", "set STRIPE_WEBHOOK_SECRET"},
		{"--provider simulated --order " + orderOfSale42, "", "set SIMULATED_WEBHOOK_SECRET"},
		{stripe + " --amount 0", "", "--amount 0: want a positive number of cents"},
		{stripe + " --amount ten", "", `invalid value "ten" for flag -amount`},
		{stripe + " --currency yuan", "", `--currency "yuan": want an ISO 4217 code`},
		{stripe + " --url 127.0.0.1:8080", "", `--url "127.0.0.1:8080": want the api's address`},
		{stripe, "HTTP_ADDR=:0", "HTTP_ADDR \":0\" has no fixed port"},
		{stripe, "HTTP_ADDR=:8080", "needs ADMIN_TOKEN, the api's: set it, or give --payment and --amount"},
	} {
		t.Run(tc.args+" "+tc.env, func(t *testing.T) {
			if k, v, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			err := runWebhook(strings.Fields(tc.args), &out)
			if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "\nusage: api webhook --order NO") {
				t.Fatalf("api webhook %s: %v (exit %d); want exit 2 naming %q, with the usage line", tc.args, err, exitCode(err), tc.want)
			}
			if out.Len() != 0 {
				t.Fatalf("a misuse sent something: %s", out.String())
			}
		})
	}
}

// The real binary's status and output for a misuse, and its help.
func TestAPI_webhookCommand_misuseExits2_helpExits0(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	code, out := testenv.RunChild(t, "TestAPI_webhookCommand_misuseExits2_helpExits0", "api", "API_ARGS=webhook --order", "PAYMENT_PROVIDER=")
	if code != 2 || !strings.Contains(out, "api: flag needs an argument: -order\nusage: api webhook --order NO") {
		t.Fatalf("api webhook --order: exit %d\n%s", code, out)
	}
	code, out = testenv.RunChild(t, "TestAPI_webhookCommand_misuseExits2_helpExits0", "api", "API_ARGS=webhook --help")
	if code != 0 || !strings.Contains(out, "usage: api webhook") || !strings.Contains(out, "STRIPE_WEBHOOK_SECRET") {
		t.Fatalf("api webhook --help: exit %d\n%s", code, out)
	}
}
