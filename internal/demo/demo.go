// Package demo is what embedded mode sets up to be tried at once: a running
// flash sale and group buy (created and published through the admin use
// cases, like POST /admin/v1/activities and …/publish), tokens for a crowd
// of users, the files ab and wrk need, and the commands that use them,
// ready to paste into bash.
package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/loadtest"
)

// The demo's size.
const (
	// Users is how many users' tokens tokens.txt holds (ids 1 to Users).
	Users = 2000
	// TokenTTL is how long the demo's tokens are valid.
	TokenTTL = 24 * time.Hour
)

// Admin is what the demo needs of the admin use cases (admin.Service).
type Admin interface {
	Create(ctx context.Context, a activity.Activity) (activity.Activity, error)
	Publish(ctx context.Context, id int64) (activity.Activity, error)
}

// Config is what the demo's text must say about the running API.
type Config struct {
	// Addr is the API's listener address (as net.Listener reports it).
	Addr       string
	AdminToken string
	// UserRPS and IPRPS are the rate limits in force (0 is off), and
	// IPDefaulted says the per-IP one is off by embedded mode's default.
	UserRPS, IPRPS int
	IPDefaulted    bool
	// Servers says where Redis and MySQL run: "IN MEMORY inside this
	// process", or the embedded servers' processes and directory.
	Servers string
}

// Demo is a set-up demo. Close removes its files.
type Demo struct {
	cfg            Config
	base           string // http://127.0.0.1:8080
	sale, groupBuy activity.Activity
	dir            string
	tokens         []string // tokens[i] is user i+1's
}

// Start creates and publishes the demo flash sale and group buy, then
// writes the demo directory: tokens.txt ("user_id<TAB>token" lines for users
// 1 to Users), orders.lua (the wrk script) and order.json (ab's body).
func Start(ctx context.Context, adm Admin, tokens *auth.Tokens, cfg Config) (*Demo, error) {
	d := &Demo{cfg: cfg, base: "http://" + health.LocalAddr(cfg.Addr)}
	now := time.Now().UTC().Truncate(time.Second)
	var err error
	d.sale, err = publish(ctx, adm, activity.Activity{
		Type: activity.Seckill, Name: "Demo phone", SKU: "DEMO-PHONE", PriceCents: 99900,
		TotalStock: 1000, PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(24 * time.Hour),
		PaymentTTL: 15 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("demo flash sale: %w", err)
	}
	d.groupBuy, err = publish(ctx, adm, activity.Activity{
		Type: activity.GroupBuy, Name: "Demo headphones, groups of 3", SKU: "DEMO-HEADPHONES", PriceCents: 19900,
		TotalStock: 300, PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(24 * time.Hour),
		PaymentTTL: 15 * time.Minute, GroupSize: 3, GroupTTL: 10 * time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("demo group buy: %w", err)
	}
	for id := int64(1); id <= Users; id++ {
		t, err := tokens.Issue(id, TokenTTL)
		if err != nil {
			return nil, err
		}
		d.tokens = append(d.tokens, t)
	}
	if err := d.writeDir(); err != nil {
		return nil, fmt.Errorf("demo files: %w", err)
	}
	return d, nil
}

// publish creates a as a draft and publishes it, as an admin would.
func publish(ctx context.Context, adm Admin, a activity.Activity) (activity.Activity, error) {
	a, err := adm.Create(ctx, a)
	if err != nil {
		return a, err
	}
	return adm.Publish(ctx, a.ID)
}

// writeDir writes the demo directory; on failure it removes it again.
func (d *Demo) writeDir() (err error) {
	if d.dir, err = os.MkdirTemp("", "flashsale-demo-"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.Close())
		}
	}()
	f, err := os.Create(filepath.Join(d.dir, "tokens.txt"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i, t := range d.tokens {
		fmt.Fprintf(w, "%d\t%s\n", i+1, t)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return err
	}
	return errors.Join(
		os.WriteFile(filepath.Join(d.dir, "orders.lua"), []byte(loadtest.WrkOrders), 0o644),
		os.WriteFile(filepath.Join(d.dir, "order.json"), []byte(`{"quantity":1}`+"\n"), 0o644),
	)
}

// path is a file of the demo directory, quoted for the shell.
func (d *Demo) path(name string) string { return shellQuote(filepath.Join(d.dir, name)) }

// Close removes the demo directory.
func (d *Demo) Close() error {
	if d.dir == "" {
		return nil
	}
	return os.RemoveAll(d.dir)
}

// Text is the block embedded mode prints: what runs where, the tokens, and
// commands that work as printed when pasted into bash, top to bottom (each
// prints the answer's body and " HTTP <status>"). Every line that is not a
// command is a comment, so the whole block may be pasted at once.
func (d *Demo) Text() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	rule := strings.Repeat("=", 100)
	sale, gb, base := d.sale.ID, d.groupBuy.ID, d.base
	const curl = `curl -s -w ' HTTP %{http_code}\n'`
	bearer := func(v string) string { return `-H "Authorization: Bearer $` + v + `"` }
	// The body's type said: curl -d alone sends a form's, which is 415.
	const qty = `-H 'Content-Type: application/json' -d '{"quantity":1}'`

	line("# %s", rule)
	line("# flashsale EMBEDDED MODE: Redis and MySQL run %s, with a worker.", d.cfg.Servers)
	line("# Every activity, order and group is LOST when it exits; %s is removed then too.", d.dir)
	line("#")
	line("# Demo flash sale %d %q: %d units, %d per user, pay within %s.", sale, d.sale.Name,
		d.sale.TotalStock, d.sale.PerUserLimit, human(d.sale.PaymentTTL))
	line("# Demo group buy %d %q: groups of %d filling within %s, %d units, %d per user.", gb, d.groupBuy.Name,
		d.groupBuy.GroupSize, human(d.groupBuy.GroupTTL), d.groupBuy.TotalStock, d.groupBuy.PerUserLimit)
	line("# %s", d.limits())
	line("# In %s: tokens.txt (users 1-%d, valid %s), orders.lua (wrk), order.json (ab).", d.dir, Users, human(TokenTTL))
	line("#")
	line("# Paste into bash, top to bottom. The tokens first:")
	line("ADMIN=%s", shellQuote(d.cfg.AdminToken))
	for i := range 3 {
		line("T%d=%s", i+1, d.tokens[i])
	}
	line("# ADMIN is ADMIN_TOKEN (/admin/v1); T1, T2, T3 are users 1, 2 and 3. The public view of the flash sale:")
	line("%s %s/v1/activities/%d", curl, base, sale)
	line("# User 1 orders one unit: 202 and an order number, kept in ORDER:")
	line(`ORDER=$(%s -X POST %s/v1/activities/%d/orders %s %s | tee /dev/stderr | sed -n 's/.*"order_no":"\([^"]*\)".*/\1/p')`,
		curl, base, sale, bearer("T1"), qty)
	line(`# The order ("persisted": true once the worker wrote it to MySQL), then paying it:`)
	line("%s %s/v1/orders/$ORDER %s", curl, base, bearer("T1"))
	line("%s -X POST %s/v1/orders/$ORDER/pay %s", curl, base, bearer("T1"))
	line("# User 1 opens a group in the group buy (kept in GROUP), user 2 joins it, and the group shows 2 of %d:",
		d.groupBuy.GroupSize)
	line(`GROUP=$(%s -X POST %s/v1/activities/%d/groups %s %s | tee /dev/stderr | sed -n 's/.*"group_id":"\([^"]*\)".*/\1/p')`,
		curl, base, gb, bearer("T1"), qty)
	line("%s -X POST %s/v1/groups/$GROUP/join %s %s", curl, base, bearer("T2"), qty)
	line("%s %s/v1/groups/$GROUP %s", curl, base, bearer("T1"))
	line("# The admin view: stock_remaining, orders_accepted, orders_persisted, reconciliation (\"pending_persistence\"")
	line("# while orders are on their way to MySQL, as the worker catches up; \"in_sync\" once it has):")
	line("%s %s/admin/v1/activities/%d %s", curl, base, sale, bearer("ADMIN"))
	refusals := "409 LIMIT_EXCEEDED"
	if d.cfg.UserRPS > 0 {
		refusals = fmt.Sprintf("429 RATE_LIMITED past %d a second, and 409 LIMIT_EXCEEDED", d.cfg.UserRPS)
	}
	line("# ab: ONE user (3) hammering the sale: one order at most is accepted, the rest refused:")
	line("# %s (ab counts them as \"Non-2xx responses\").", refusals)
	line("# Its \"Failed requests: ... (Length: ...)\" are those answers too, not errors: ab counts as failed every answer")
	line("# whose length differs from the first answer's, and the acceptance and each kind of refusal have bodies of their own.")
	line(`ab -n 2000 -c 50 -k -p %s -T application/json %s %s/v1/activities/%d/orders`,
		d.path("order.json"), bearer("T3"), base, sale)
	line("# wrk: a crowd, users 1-%d in turn, until the %d units are gone (then 409 SOLD_OUT); FLASHSALE sums the statuses:",
		Users, d.sale.TotalStock)
	line("wrk -t2 -c50 -d5s -s %s %s -- %d %s", d.path("orders.lua"), base, sale, d.path("tokens.txt"))
	line("# The admin console: open %s/admin/ in a browser and sign in with ADMIN's value (the live page", base)
	line("# of sale %d shows the stock falling while wrk runs). The API contract: %s/openapi.json", sale, base)
	line("# %s", rule)
	return b.String()
}

// limits says which rate limits are in force.
func (d *Demo) limits() string {
	ip := "per client IP " + perSecond(d.cfg.IPRPS) + " (RATE_LIMIT_IP_RPS)"
	if d.cfg.IPDefaulted {
		ip = "per client IP off: every local client is 127.0.0.1 (RATE_LIMIT_IP_RPS=100 turns it on)"
	}
	return "Rate limits on /v1: per user " + perSecond(d.cfg.UserRPS) + " (RATE_LIMIT_USER_RPS); " + ip + "."
}

// human is d as "15 min" or "24 h".
func human(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}

// shellQuote is s as one bash word: unchanged if it is plain, else in
// single quotes.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func perSecond(rps int) string {
	if rps <= 0 {
		return "off"
	}
	return fmt.Sprintf("%d requests/s", rps)
}
