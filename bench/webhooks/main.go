// Command webhooks measures the payment provider's confirmations through
// one api (`make bench-webhooks`; docs/benchmarks.md): webhook deliveries
// a second, signature check included, each paying its order (the order's
// lock, transition.lua, the payment's record), with a worker persisting
// the orders and the payments into MariaDB meanwhile — on real processes
// (the load-test kit's stack: redis-server, mariadbd, one api, one worker),
// the simulated provider's webhooks signed with Stripe's scheme. It places
// -orders orders first (not measured), then sends their confirmations from
// -conc goroutines, then replays every one (handled once: the event's id),
// and waits until MySQL holds every order paid and every payment recorded.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/paysim"
)

func main() {
	orders := flag.Int("orders", 20000, "orders placed, then confirmed")
	conc := flag.Int("conc", 32, "concurrent webhook senders")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *orders, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "webhooks: "+format+"\n", args...) }

func run(ctx context.Context, n, conc int) error {
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Log: say,
		Env: []string{"RATE_LIMIT_IP_RPS=0", "RATE_LIMIT_USER_RPS=0"}})
	if err != nil {
		return err
	}
	defer stack.Close()
	db, err := sql.Open("mysql", stack.MySQLDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	sale, err := loadtest.CreateSale(ctx, stack.URL, stack.AdminToken, loadtest.Sale{Stock: n, Limit: 1, PriceCents: 500})
	if err != nil {
		return err
	}
	tokens, err := auth.New(stack.JWTSecret)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2}, Timeout: 10 * time.Second}

	say("placing %d orders", n)
	nos := make([]string, n)
	err = parallel(ctx, n, conc, func(i int) error {
		tok, err := tokens.Issue(int64(i+1), time.Hour)
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/activities/%d/orders", stack.URL, sale),
			bytes.NewReader([]byte(`{"quantity":1}`)))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			OrderNo string `json:"order_no"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 202 {
			return fmt.Errorf("order %d: %d %v", i, resp.StatusCode, err)
		}
		nos[i] = body.OrderNo
		return nil
	})
	if err != nil {
		return err
	}

	prov := paysim.New(paysim.Config{Secret: stack.WebhookSecret, HTTPClient: hc})
	url := stack.URL + "/webhooks/simulated"
	event := func(i int) paysim.Event {
		return paysim.Event{ID: fmt.Sprintf("bench_evt_%d", i), Type: string(payment.PaymentSucceeded),
			PaymentID: fmt.Sprintf("bench_pi_%d", i), OrderNo: nos[i], AmountCents: 500, Currency: "cny", Created: time.Now().Unix()}
	}
	send := func(what string) (time.Duration, []time.Duration, error) {
		lat := make([]time.Duration, n)
		var fails atomic.Int64
		start := time.Now()
		err := parallel(ctx, n, conc, func(i int) error {
			t0 := time.Now()
			if err := prov.Deliver(ctx, url, event(i)); err != nil {
				fails.Add(1)
				return fmt.Errorf("%s %d: %w", what, i, err)
			}
			lat[i] = time.Since(t0)
			return nil
		})
		return time.Since(start), lat, err
	}
	say("confirming them: %d webhooks, %d at once", n, conc)
	api := stack.APIs[0]
	cpu0, err := api.CPUTime()
	if err != nil {
		return err
	}
	took, lat, err := send("webhook")
	if err != nil {
		return err
	}
	cpu1, err := api.CPUTime()
	if err != nil {
		return err
	}
	apiCPU := cpu1 - cpu0
	say("replaying every one")
	retook, relat, err := send("replay")
	if err != nil {
		return err
	}
	say("waiting for MySQL: every order paid, every payment recorded")
	t0 := time.Now()
	for {
		var paid, recorded int
		_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE activity_id = ? AND status = 'paid'", sale).Scan(&paid)
		_ = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payments WHERE activity_id = ? AND status = 'succeeded'", sale).Scan(&recorded)
		if paid == n && recorded == n {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("after 5 min MySQL holds %d of %d paid orders and %d payments", paid, n, recorded)
		}
		time.Sleep(200 * time.Millisecond)
	}
	lag := time.Since(t0)
	fmt.Printf("one api, one worker persisting meanwhile, %d orders, %d senders; %s\n\n", n, conc, loadtest.Machine())
	fmt.Println("| | webhooks/s | p50 | p99 | api CPU µs/webhook |")
	fmt.Println("|---|---:|---:|---:|---:|")
	fmt.Printf("| confirmations (each pays its order) | %.0f | %v | %v | %.0f |\n", float64(n)/took.Seconds(),
		pct(lat, 50), pct(lat, 99), float64(apiCPU.Microseconds())/float64(n))
	fmt.Printf("| replays (the same events again: handled once) | %.0f | %v | %v | |\n", float64(n)/retook.Seconds(), pct(relat, 50), pct(relat, 99))
	fmt.Printf("\nMySQL held every order paid and every payment %v after the last replay.\n", lag.Round(10*time.Millisecond))
	return nil
}

// parallel runs f(0..n-1) from conc goroutines; the first error ends it.
func parallel(ctx context.Context, n, conc int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return ctx.Err()
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(10 * time.Microsecond)
}
