package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/webhook"
)

func TestPublic_refusesEveryPrivateKindOfAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700::1111": true, "93.184.216.34": true,
		"127.0.0.1": false, "127.5.5.5": false, "10.1.2.3": false, "172.16.0.1": false, "172.31.255.255": false,
		"192.168.1.1": false, "169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "0.1.2.3": false,
		"224.0.0.1": false, "255.255.255.255": false, "240.0.0.1": false, "198.18.0.1": false, "192.0.2.1": false,
		"::": false, "::1": false, "fe80::1": false, "fc00::1": false, "fd12:3456::1": false, "ff02::1": false,
		"::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false, "::ffff:8.8.8.8": true, "::127.0.0.1": false,
		"64:ff9b::7f00:1": false, "64:ff9b::808:808": true, "2002:7f00:1::": false, "2002:808:808::": true,
		"2001:db8::1": false, "2001:0:4136:e378::1": false, "fec0::1": false,
	} {
		if got := webhook.Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// resolver answers fixed addresses for each host.
type resolver map[string][]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range r[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, errors.New("no such host")
	}
	return out, nil
}

func TestGuard_CheckURL_refusesAHostWithAnyPrivateAddress(t *testing.T) {
	g := webhook.Guard{Resolver: resolver{
		"shop.example":  {"93.184.216.34"},
		"mixed.example": {"93.184.216.34", "10.0.0.7"}, // one bad address is enough to refuse
		"meta.example":  {"169.254.169.254"},
	}}
	ctx := context.Background()
	for raw, wantOK := range map[string]bool{
		"https://shop.example/hooks":   true,
		"http://shop.example:8080/x":   true,
		"https://8.8.8.8/x":            true,
		"https://mixed.example/hooks":  false,
		"https://meta.example/":        false,
		"http://127.0.0.1:9000/":       false,
		"http://[::1]/":                false,
		"https://nowhere.example/":     false, // does not resolve
		"ftp://shop.example/":          false,
		"https://user:pw@shop.example": false,
		"https://shop.example/#frag":   false,
		"/relative":                    false,
		"":                             false,
	} {
		err := g.CheckURL(ctx, raw)
		if (err == nil) != wantOK {
			t.Errorf("CheckURL(%q) = %v, want ok %v", raw, err, wantOK)
		}
		if err != nil && (!errors.Is(err, webhook.ErrInvalid) || refusal.Field(err) != "url") {
			t.Errorf("CheckURL(%q): %v is not an invalid url", raw, err)
		}
	}
	open := webhook.Guard{AllowPrivate: true}
	if err := open.CheckURL(ctx, "http://127.0.0.1:9000/hooks"); err != nil {
		t.Errorf("WEBHOOK_ALLOW_PRIVATE refuses loopback: %v", err)
	}
	if err := open.CheckURL(ctx, "ftp://127.0.0.1/"); err == nil {
		t.Error("WEBHOOK_ALLOW_PRIVATE lets a non-http URL through")
	}
}

// A name that resolved to a public address when the endpoint was set can
// resolve to a private one when a delivery goes (DNS rebinding): the
// sender checks the address it connects to, whatever the name.
func TestSender_connectionToAPrivateAddress_isRefusedAtDialTime(t *testing.T) {
	hit := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = true }))
	defer srv.Close()
	ep := webhook.Endpoint{ID: 1, URL: srv.URL, Secret: webhook.NewSecret(), Enabled: true}
	d := webhook.Delivery{EndpointID: 1, EventID: "evt_1", Type: webhook.OrderPaid, Body: []byte(`{}`)}

	status, _, err := webhook.NewSender(webhook.SenderConfig{}).Send(context.Background(), ep, d)
	if !errors.Is(err, webhook.ErrPrivateAddress) || status != 0 || hit {
		t.Fatalf("to %s: status %d, err %v, reached %v; want refused before connecting", srv.URL, status, err, hit)
	}
	status, _, err = webhook.NewSender(webhook.SenderConfig{Guard: webhook.Guard{AllowPrivate: true}}).Send(context.Background(), ep, d)
	if err != nil || status != 200 || !hit {
		t.Fatalf("allowed: status %d, err %v", status, err)
	}
}

// A redirect is not followed (it would leave the URL the guard checked)
// and is not a delivery.
func TestSender_redirect_isAFailedAttempt(t *testing.T) {
	followed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/elsewhere") {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	ep := webhook.Endpoint{ID: 1, URL: srv.URL + "/hooks", Secret: webhook.NewSecret(), Enabled: true}
	status, _, err := webhook.NewSender(webhook.SenderConfig{Guard: webhook.Guard{AllowPrivate: true}}).
		Send(context.Background(), ep, webhook.Delivery{EventID: "evt_1", Body: []byte(`{}`)})
	if err == nil || status != http.StatusTemporaryRedirect || followed {
		t.Fatalf("status %d, err %v, followed %v", status, err, followed)
	}
}
