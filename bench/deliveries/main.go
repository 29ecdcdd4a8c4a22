// Command deliveries measures the shop's webhooks delivered by one worker
// (`make bench-deliveries`; docs/benchmarks.md, docs/webhooks.md): order
// events appended to the outbox (as the worker's order write will append
// them: batches of 100 events a transaction), turned into delivery tasks by
// the dispatcher, signed and sent to a receiver that verifies each with the
// Standard Webhooks library and answers 200 — on real processes (the
// load-test kit's stack: redis-server, mariadbd, one api, one worker; the
// receiver in this process). For each row it reports deliveries a second
// from the first append to the last delivery verified, and the worker's and
// Redis's main-thread CPU per delivery over that time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

func main() {
	events := flag.Int("events", 20000, "order events appended per row")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *events); err != nil {
		fmt.Fprintln(os.Stderr, "deliveries:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "deliveries: "+format+"\n", args...) }

// receiver verifies each delivery with the secrets it knows and counts the
// event ids it took.
type receiver struct {
	mu      sync.Mutex
	hooks   []*standardwebhooks.Webhook
	got     map[string]bool
	n, bad  atomic.Int64
	lastAt  atomic.Int64 // unix ns of the last new id
	addr    string
	started time.Time
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	hooks := r.hooks
	r.mu.Unlock()
	for _, wh := range hooks {
		if wh.Verify(body, req.Header) == nil {
			id := req.Header.Get(webhook.HeaderID) + " " + req.URL.Path
			r.mu.Lock()
			if !r.got[id] {
				r.got[id] = true
				r.n.Add(1)
				r.lastAt.Store(time.Now().UnixNano())
			}
			r.mu.Unlock()
			return
		}
	}
	r.bad.Add(1)
	w.WriteHeader(http.StatusBadRequest)
}

type row struct {
	name      string
	endpoints int
}

func run(ctx context.Context, n int) error {
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Workers: 1, Log: say,
		Env: []string{"WEBHOOK_ALLOW_PRIVATE=true"}})
	if err != nil {
		return err
	}
	defer stack.Close()
	db, err := connect.MySQL(stack.MySQLDSN)
	if err != nil {
		return err
	}
	hooks := mysqlstore.NewWebhooks(db)
	defer hooks.Close()
	rdb, err := connect.Redis(stack.RedisURL, connect.RedisMode{})
	if err != nil {
		return err
	}
	defer rdb.Close()

	rcv := &receiver{got: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rcv}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	rcv.addr = ln.Addr().String()

	var lines []string
	for i, r := range []row{{"1 endpoint", 1}, {"4 endpoints, each subscribed to everything", 4}} {
		line, err := measure(ctx, stack, hooks, rdb, rcv, r, n, int64(1000+i))
		if err != nil {
			return err
		}
		lines = append(lines, line)
	}
	fmt.Printf("one worker (WEBHOOK_CONCURRENCY 32, WEBHOOK_ENDPOINT_CONCURRENCY 8), the receiver in the harness's process; %d events a row; %s\n\n",
		n, loadtest.Machine())
	fmt.Println("| row | deliveries | deliveries/s | worker CPU µs/delivery | Redis main-thread CPU µs/delivery | batches turned away (endpoint busy) | signatures refused |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}

// measure creates r's endpoints, appends n order events of activity act,
// waits until every one reached every endpoint, and deletes the endpoints.
func measure(ctx context.Context, stack *loadtest.Stack, hooks *mysqlstore.Webhooks, rdb redis.UniversalClient, rcv *receiver,
	r row, n int, act int64) (string, error) {
	var ids []int64
	rcv.mu.Lock()
	rcv.hooks = nil
	rcv.mu.Unlock()
	for e := range r.endpoints {
		body := fmt.Sprintf(`{"url":"http://%s/hooks/%d","events":["*"]}`, rcv.addr, e)
		var ep struct {
			ID     int64  `json:"id"`
			Secret string `json:"secret"`
		}
		if err := admin(ctx, stack, "POST", "/admin/v1/webhook-endpoints", body, &ep); err != nil {
			return "", err
		}
		wh, err := standardwebhooks.NewWebhook(ep.Secret)
		if err != nil {
			return "", err
		}
		rcv.mu.Lock()
		rcv.hooks = append(rcv.hooks, wh)
		rcv.mu.Unlock()
		ids = append(ids, ep.ID)
	}
	worker := stack.Workers[0]
	busy0, err := busyBatches(ctx, worker.Addr)
	if err != nil {
		return "", err
	}
	before := rcv.n.Load()
	want := before + int64(n*r.endpoints)
	cpu0, err := worker.CPUTime()
	if err != nil {
		return "", err
	}
	red0, err := loadtest.RedisMainCPU(ctx, rdb)
	if err != nil {
		return "", err
	}
	start := time.Now()
	say("%s: appending %d events", r.name, n)
	for i := 0; i < n; i += 100 {
		var batch []webhook.Event
		for j := i; j < min(i+100, n); j++ {
			o := order.Order{No: order.NewNo(act), ActivityID: act, UserID: int64(j + 1), Quantity: 1, AmountCents: 990,
				Status: order.PendingPayment, CreatedAt: time.Now()}
			batch = append(batch, webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "PH-X", Currency: "cny"})...)
		}
		if err := hooks.Append(ctx, batch...); err != nil {
			return "", err
		}
	}
	say("%s: appended in %v; waiting for %d deliveries", r.name, time.Since(start).Round(time.Millisecond), n*r.endpoints)
	for rcv.n.Load() < want {
		if ctx.Err() != nil || time.Since(start) > 10*time.Minute {
			return "", fmt.Errorf("%s: %d of %d delivered after %v", r.name, rcv.n.Load()-before, n*r.endpoints, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Unix(0, rcv.lastAt.Load()).Sub(start)
	cpu1, err := worker.CPUTime()
	if err != nil {
		return "", err
	}
	red1, err := loadtest.RedisMainCPU(ctx, rdb)
	if err != nil {
		return "", err
	}
	busy1, err := busyBatches(ctx, worker.Addr)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		if err := admin(ctx, stack, "DELETE", fmt.Sprintf("/admin/v1/webhook-endpoints/%d", id), "", nil); err != nil {
			return "", err
		}
	}
	d := float64(n * r.endpoints)
	return fmt.Sprintf("| %s | %d | %.0f | %.0f | %.1f | %.0f | %d |", r.name, n*r.endpoints, d/took.Seconds(),
		float64((cpu1-cpu0).Microseconds())/d, float64((red1-red0).Microseconds())/d, busy1-busy0, rcv.bad.Load()), nil
}

// busyBatches reads the worker's count of batches turned away by their
// endpoint's limit (flashsale_webhook_deliveries_total{outcome="busy"}).
func busyBatches(ctx context.Context, addr string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, `flashsale_webhook_deliveries_total{outcome="busy"} `); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("the worker's metrics have no busy count")
}

func admin(ctx context.Context, stack *loadtest.Stack, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, stack.URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+stack.AdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}
