package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// EmbeddedSaleEnv sets the units of TestEmbedded_bigSale's sale: make
// test-embedded-100k sets 100000; unset, the normal suite's brief 20,000.
const EmbeddedSaleEnv = "FLASHSALE_EMBEDDED_SALE"

// A big sale in embedded mode (issue 39: 30,000 units sold out in 25 s,
// then the worker persisted for 14 minutes and more, and the public view,
// the admin API and /readyz answered 503 the whole time): sold out by a
// crowd of wrk connections with fresh users, every order persisted exactly
// once (MySQL's count equals the orders accepted, and every invariant
// holds), and the public view, an admin view and /readyz asked every
// second through the sale and the drain, every answer 200 within
// REQUEST_TIMEOUT. It logs how long the sell-out and the drain took.
func TestEmbedded_bigSale_soldOutPersisted_everyRouteAnswering(t *testing.T) {
	units := 20_000
	if v := os.Getenv(EmbeddedSaleEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a number of units", EmbeddedSaleEnv, v)
		}
		units = n
	}
	r := bigSale(t, "servers", units, 10*time.Minute)
	t.Logf("embedded mode (servers), %d units: sold out in %v, the last order persisted %v after (%.0f orders/s over the sale and the drain); %d route polls, all 200",
		units, r.sellOut.Round(100*time.Millisecond), r.drain.Round(100*time.Millisecond),
		float64(units)/(r.sellOut+r.drain).Seconds(), r.polls)
}

// Without redis-server and mariadbd (EMBEDDED_MODE=memory), a sale of the
// most units the in-memory servers take sells out, persists and leaves
// every route answering too, and one a unit larger is refused at creation,
// saying why and what to do (issue 39: such a sale was taken and wedged).
func TestEmbedded_memory_saleAtItsLimit_persisted_andOneLarger_refusedAtCreation(t *testing.T) {
	// 2 minutes, four times that under the race detector: measured
	// 2026-11-29, the last order persisted 7–8 s after the sell-out without
	// it, 1m58s with it alone on the machine and past 2 minutes in make
	// test (go-mysql-server is pure Go; since issue 41 each order's write
	// also appends its events in the same transaction: 1.9 s before,
	// without the race detector). A wedge still fails it.
	drain := 2 * time.Minute
	if raceOn {
		drain *= 4
	}
	r := bigSale(t, "memory", embedded.MaxMemoryStock, drain)
	t.Logf("embedded mode (memory), %d units: sold out in %v, the last order persisted %v after; %d route polls, all 200",
		embedded.MaxMemoryStock, r.sellOut.Round(100*time.Millisecond), r.drain.Round(100*time.Millisecond), r.polls)

	api, _, _ := startEmbedded(t, map[string]string{"EMBEDDED_MODE": "memory"})
	body := fmt.Sprintf(`{"type":"seckill","name":"big","sku":"BIG","price_cents":100,"total_stock":%d,"per_user_limit":1,`+
		`"starts_at":%q,"ends_at":%q}`, embedded.MaxMemoryStock+1,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339))
	req, _ := http.NewRequest("POST", "http://"+api.Addr+"/admin/v1/activities", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+api.Config.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apitest.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`"code":"INVALID_ARGUMENT"`, `"field":"total_stock"`, fmt.Sprintf("must be at most %d here", embedded.MaxMemoryStock),
		"runs MySQL in memory", "install redis-server and mariadb-server"} {
		if resp.StatusCode != 400 || !strings.Contains(string(raw), want) {
			t.Fatalf("a sale of %d units in memory: %d %s; want 400 with %s", embedded.MaxMemoryStock+1, resp.StatusCode, raw, want)
		}
	}
}

// saleRun is what bigSale measured.
type saleRun struct {
	sellOut time.Duration // from the first request to no unit left
	drain   time.Duration // from then to every accepted order in MySQL
	polls   int
}

// bigSale sells a sale of units (1 a user) in embedded mode to wrk's
// crowd, waits up to drainFor for every order to reach MySQL, checks the
// invariants, and fails the test on any answer of the polled routes that
// was not a 200 within REQUEST_TIMEOUT.
func bigSale(t *testing.T, mode string, units int, drainFor time.Duration) saleRun {
	env := map[string]string{"EMBEDDED_MODE": mode}
	if raceOn && mode == "memory" {
		// The race detector slows the pure-Go SQL server several times: in
		// make test, beside the other packages, an admin view of the
		// memory sale once took past the default 3 s (CI, 2026-11-29; 19 s
		// to persist the sale alone, 40 s there). A wedge still fails it.
		env["REQUEST_TIMEOUT"] = "10s"
	}
	api, _, _ := startEmbedded(t, env)
	base := "http://" + api.Addr
	ctx := context.Background()
	sale, err := loadtest.CreateSale(ctx, base, api.Config.AdminToken, loadtest.Sale{Stock: units, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokens := dir + "/tokens.txt"
	if err := loadtest.WriteTokens(tokens, api.Config.JWTSecret, 1, units+units/4, time.Hour); err != nil {
		t.Fatal(err)
	}

	p := startPolling(t, api, sale)
	start := time.Now()
	soldOut := make(chan struct{})
	go func() { <-p.soldOut; close(soldOut) }()
	res, err := loadtest.RunWrk(ctx, loadtest.WrkRun{URL: base, Activity: sale, TokensFile: tokens, Threads: 2, Conns: 64,
		Duration: 30 * time.Minute, Dir: dir, Stop: soldOut})
	if err != nil {
		t.Fatal(err)
	}
	r := saleRun{sellOut: p.soldOutAt.Sub(start)}
	if res.Codes["202"] != int64(units) || res.Errors != 0 {
		t.Errorf("wrk: %v answers, %d errors; want %d accepted", res.Codes, res.Errors, units)
	}

	db, err := sql.Open("mysql", api.Config.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rdb, err := connect.Redis(api.Config.RedisURL, connect.RedisMode{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ok, err := loadtest.WaitPersisted(ctx, rdb, db, sale, drainFor)
	if err != nil {
		t.Fatal(err)
	}
	r.drain = time.Since(p.soldOutAt)
	r.polls = p.stop()
	if !ok {
		var n int64
		_ = db.QueryRow("SELECT COUNT(*) FROM orders WHERE activity_id = ?", sale).Scan(&n)
		t.Fatalf("%d of %d orders in MySQL %v after the sell-out", n, units, r.drain.Round(time.Second))
	}
	inv, err := invariants.Run(ctx, rdb, db, sale, invariants.Options{Accepted: res.Codes["202"], ExpectPersisted: true})
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Fatalf("invariants:\n%s", inv)
	}
	return r
}

// poller asks the public view, an admin view and /readyz of a sale every
// second, and fails the test on an answer that is not a 200 within
// REQUEST_TIMEOUT; and it watches the sale's stock in Redis (every 100 ms)
// for the moment none is left.
type poller struct {
	soldOut   chan struct{} // closed once no unit is left
	soldOutAt time.Time     // set before soldOut closes
	stop      func() int    // stops it; how many route polls it made
}

func startPolling(t *testing.T, api *app.API, sale int64) *poller {
	t.Helper()
	rdb, err := connect.Redis(api.Config.RedisURL, connect.RedisMode{})
	if err != nil {
		t.Fatal(err)
	}
	p := &poller{soldOut: make(chan struct{})}
	base, limit := "http://"+api.Addr, api.Config.RequestTimeout
	client := &http.Client{Timeout: limit + 5*time.Second}
	paths := []string{fmt.Sprintf("/v1/activities/%d", sale), fmt.Sprintf("/admin/v1/activities/%d", sale), "/readyz"}
	quit, done := make(chan struct{}), make(chan struct{})
	var polls int
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, r := range pollRoutes(client, base, api.Config.AdminToken, paths...) {
				polls++
				if r.code != 200 || r.took > limit {
					t.Errorf("GET %s: %d in %v (limit %v): %.300s", r.path, r.code, r.took.Round(time.Millisecond), limit, r.body)
				}
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		key := rediskeys.For(sale).Stock
		for {
			if left, err := rdb.Get(context.Background(), key).Int64(); err == nil && left == 0 {
				p.soldOutAt = time.Now()
				close(p.soldOut)
				return
			}
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	p.stop = func() int {
		once.Do(func() { close(quit); <-done; <-watched; rdb.Close() })
		return polls
	}
	t.Cleanup(func() { p.stop() })
	return p
}

// polled is one poll's answer.
type polled struct {
	path string
	code int
	took time.Duration
	body string
}

// pollRoutes asks each path of base once, the admin's with token.
func pollRoutes(client *http.Client, base, token string, paths ...string) []polled {
	out := make([]polled, 0, len(paths))
	for _, path := range paths {
		req, _ := http.NewRequest("GET", base+path, nil)
		if strings.HasPrefix(path, "/admin/") {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		start := time.Now()
		resp, err := client.Do(req)
		p := polled{path: path, took: time.Since(start)}
		if err != nil {
			p.body = err.Error()
		} else {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			p.code, p.body = resp.StatusCode, string(raw)
		}
		out = append(out, p)
	}
	return out
}
