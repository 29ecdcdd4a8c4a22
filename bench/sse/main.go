// Command sse measures the order streams on one api process (`make
// bench-sse`; docs/benchmarks.md, docs/streams.md): -streams open Server-
// Sent Events streams (GET /v1/orders/{order_no}/events, HTTP/1.1, a
// connection each, one order each, placed through the api), the api's
// resident memory with all of them open, what Redis executes in -idle
// seconds while they are idle, then each order's order.paid published at
// -rate events a second (batches every 10 ms, through stream.Publisher, as
// the worker's commit hook will) and the latency from the publish to the
// client's read of the event, p50/p99/max. On real processes: the load-test
// kit's stack (redis-server, mariadbd, one api; no worker: the orders stay
// in Redis, which the streams read them from). The harness raises its file
// limit (it is root, or the limit allows) and the api inherits it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/loadtest"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/webhook"
)

func main() {
	n := flag.Int("streams", 20000, "open streams")
	rate := flag.Int("rate", 1000, "events published a second")
	idle := flag.Duration("idle", 5*time.Second, "how long the streams stay idle while Redis's commands are counted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *rate, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "sse:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "sse: "+format+"\n", args...) }

func run(ctx context.Context, n, rate int, idle time.Duration) error {
	// Every stream is a connection at each end: the harness and the api
	// (which inherits the limit) each need n descriptors and more.
	// Each end needs n descriptors and a few hundred more (the api's
	// Redis and MySQL pools, the harness's Redis client). Raising the hard
	// limit needs CAP_SYS_RESOURCE; without it, the soft limit goes up to
	// the hard one and n must fit under it: a stream the api cannot accept
	// would hang, not fail.
	want := uint64(n + 1024)
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	if lim.Max < want {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: want, Max: want}); err != nil {
			return fmt.Errorf("%d streams need a file limit of %d, the hard limit is %d and cannot be raised (%v): "+
				"run as root with CAP_SYS_RESOURCE, or ask for at most %d streams", n, want, lim.Max, err, lim.Max-1024)
		}
	} else if lim.Cur < want {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return err
		}
	}
	root, err := loadtest.ModuleRoot(ctx)
	if err != nil {
		return err
	}
	stack, err := loadtest.StartStack(ctx, root, loadtest.StackOptions{APIs: 1, Log: say,
		Env: []string{"RATE_LIMIT_IP_RPS=0", "RATE_LIMIT_USER_RPS=0"}})
	if err != nil {
		return err
	}
	defer stack.Close()
	api := stack.APIs[0]
	rdb, err := connect.Redis(stack.RedisURL, connect.RedisMode{})
	if err != nil {
		return err
	}
	defer rdb.Close()
	tokens, err := auth.New(stack.JWTSecret)
	if err != nil {
		return err
	}

	act, err := sale(ctx, stack, n)
	if err != nil {
		return err
	}
	say("placing %d orders, one per user", n)
	orders, err := place(ctx, stack.URL, tokens, act, n)
	if err != nil {
		return err
	}

	rss0, _ := rss(api.PID())
	say("opening %d streams", n)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true,
		ResponseHeaderTimeout: 30 * time.Second}}
	c := &clients{got: make([]time.Time, n), pub: make([]atomic.Int64, n)}
	openStart := time.Now()
	if err := c.open(ctx, client, stack.URL, tokens, orders); err != nil {
		return err
	}
	openTook := time.Since(openStart)
	time.Sleep(2 * time.Second) // settle: the api's buffers, the GC
	rssOpen, _ := rss(api.PID())
	numsub, pubsubConns, err := subscriptions(ctx, rdb)
	if err != nil {
		return err
	}
	say("%d streams open in %v; api RSS %d MiB; idle for %v", c.open_.Load(), openTook.Round(time.Millisecond), rssOpen>>20, idle)
	before, err := commands(ctx, rdb)
	if err != nil {
		return err
	}
	cpu0, _ := api.CPUTime()
	time.Sleep(idle)
	cpu1, _ := api.CPUTime()
	after, err := commands(ctx, rdb)
	if err != nil {
		return err
	}
	var idleCmds []string
	for k, v := range after {
		if d := v - before[k]; d > 0 && k != "info" {
			idleCmds = append(idleCmds, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(idleCmds)

	say("publishing %d order.paid at %d/s", n, rate)
	pub := stream.NewPublisher(rdb)
	perTick := max(1, rate/100)
	tick := time.NewTicker(10 * time.Millisecond)
	pubStart := time.Now()
	cpu2, _ := api.CPUTime()
	for i := 0; i < n; {
		<-tick.C
		var batch []webhook.Event
		var idx []int
		for ; i < n && len(idx) < perTick; i++ {
			o := orders[i]
			o.Status, o.PaidAt, o.PaymentID = order.Paid, time.Now(), "pi_bench"
			batch = append(batch, webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "SSE", Currency: "usd"})[1])
			idx = append(idx, i)
		}
		now := time.Now().UnixNano()
		for _, j := range idx {
			c.pub[j].Store(now)
		}
		if err := pub.Publish(ctx, batch); err != nil {
			return err
		}
	}
	tick.Stop()
	pubTook := time.Since(pubStart)
	deadline := time.Now().Add(30 * time.Second)
	for c.paid.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cpu3, _ := api.CPUTime()
	c.wg.Wait()
	peak, _ := api.PeakRSS()

	var lat []time.Duration
	for i := range n {
		if p := c.pub[i].Load(); p > 0 && !c.got[i].IsZero() {
			lat = append(lat, c.got[i].Sub(time.Unix(0, p)))
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	fmt.Printf("one api process (GOMAXPROCS default), %d streams over HTTP/1.1 from the harness's process on the same machine; %s\n\n",
		n, loadtest.Machine())
	fmt.Println("| measure | value |")
	fmt.Println("|---|---:|")
	fmt.Printf("| streams opened (first event read) | %d of %d, in %v |\n", c.open_.Load(), n, openTook.Round(time.Millisecond))
	fmt.Printf("| api RSS with the orders placed, before the streams / with every stream open | %d MiB / %d MiB (%.1f KiB a stream) |\n",
		rss0>>20, rssOpen>>20, float64(rssOpen-rss0)/1024/float64(max(1, n)))
	fmt.Printf("| api peak RSS (VmHWM) over the run | %d MiB |\n", peak>>20)
	fmt.Printf("| Redis: subscribers of the 8 stream channels / pub/sub connections | %v / %d |\n", numsub, pubsubConns)
	fmt.Printf("| Redis commands in %v with every stream idle (INFO commandstats, INFO itself left out) | %s |\n", idle, orNone(idleCmds))
	fmt.Printf("| api CPU while idle | %v in %v |\n", (cpu1 - cpu0).Round(time.Millisecond), idle)
	fmt.Printf("| order.paid published | %d at %d/s (took %v), one PUBLISH a shard every 10 ms |\n", n, rate, pubTook.Round(time.Millisecond))
	fmt.Printf("| received | %d; streams ended cleanly after it %d |\n", c.paid.Load(), c.clean.Load())
	fmt.Printf("| publish → client latency p50 / p99 / max | %v / %v / %v |\n", q(0.50), q(0.99), q(1))
	fmt.Printf("| api CPU while publishing | %v in %v |\n", (cpu3 - cpu2).Round(time.Millisecond), time.Since(pubStart).Round(time.Millisecond))
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// rss is the process's resident memory now (VmRSS), in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

// sale creates and publishes a flash sale of n units, 1 per user.
func sale(ctx context.Context, stack *loadtest.Stack, n int) (int64, error) {
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := fmt.Sprintf(`{"type":"seckill","name":"sse","sku":"SSE","price_cents":500,"total_stock":%d,"per_user_limit":1,
		"starts_at":%q,"ends_at":%q,"payment_ttl_seconds":3600}`, n, start, end)
	var a struct {
		ID int64 `json:"id"`
	}
	if err := call(ctx, "POST", stack.URL+"/admin/v1/activities", "Bearer "+stack.AdminToken, body, 201, &a); err != nil {
		return 0, err
	}
	return a.ID, call(ctx, "POST", fmt.Sprintf("%s/admin/v1/activities/%d/publish", stack.URL, a.ID), "Bearer "+stack.AdminToken, "", 200, nil)
}

func call(ctx context.Context, method, url, authz, body string, want int, out any) error {
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Authorization", authz)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// place places one order for each of users 1..n, 64 at a time.
func place(ctx context.Context, base string, tokens *auth.Tokens, act int64, n int) ([]order.Order, error) {
	out := make([]order.Order, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			user := int64(i + 1)
			tok, _ := tokens.Issue(user, 2*time.Hour)
			var r struct {
				OrderNo     string    `json:"order_no"`
				AmountCents int64     `json:"amount_cents"`
				CreatedAt   time.Time `json:"created_at"`
			}
			if err := call(ctx, "POST", fmt.Sprintf("%s/v1/activities/%d/orders", base, act), "Bearer "+tok, `{"quantity":1}`, 202, &r); err != nil {
				errs <- err
				return
			}
			out[i] = order.Order{No: r.OrderNo, ActivityID: act, UserID: user, Quantity: 1, AmountCents: r.AmountCents,
				Status: order.PendingPayment, CreatedAt: r.CreatedAt}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// clients are the streams' readers.
type clients struct {
	wg    sync.WaitGroup
	got   []time.Time    // when stream i read order.paid
	pub   []atomic.Int64 // when order i's order.paid was published (unix ns)
	open_ atomic.Int64   // streams whose first event was read
	paid  atomic.Int64
	clean atomic.Int64 // streams that ended cleanly after order.paid
}

// open opens a stream of each order, 200 at a time, and returns once each
// has read its first event (order.accepted).
func (c *clients) open(ctx context.Context, client *http.Client, base string, tokens *auth.Tokens, orders []order.Order) error {
	sem := make(chan struct{}, 200)
	var failed atomic.Int64
	var firstErr atomic.Value
	var opened sync.WaitGroup
	for i, o := range orders {
		sem <- struct{}{}
		opened.Add(1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			tok, _ := tokens.Issue(o.UserID, 2*time.Hour)
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/orders/"+o.No+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err == nil && resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				err = fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				<-sem
				opened.Done()
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReaderSize(resp.Body, 1024)
			first := true
			for {
				line, err := rd.ReadSlice('\n')
				if err != nil {
					if first {
						<-sem
						opened.Done()
					}
					return
				}
				switch {
				case bytes.HasPrefix(line, []byte("event: order.accepted")) && first:
					first = false
					c.open_.Add(1)
					<-sem
					opened.Done()
				case bytes.HasPrefix(line, []byte("event: order.paid")):
					c.got[i] = time.Now()
					c.paid.Add(1)
					if _, err := io.Copy(io.Discard, rd); err == nil {
						c.clean.Add(1)
					}
					return
				}
			}
		}()
	}
	opened.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d streams failed to open; the first: %v", f, firstErr.Load())
	}
	return nil
}

// subscriptions are the stream channels' subscriber counts and the
// server's pub/sub connections.
func subscriptions(ctx context.Context, rdb redis.UniversalClient) ([]int64, int, error) {
	var counts []int64
	for i := range 8 {
		ch := fmt.Sprintf("fs:{stream:%d}", i)
		m, err := rdb.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			return nil, 0, err
		}
		counts = append(counts, m[ch])
	}
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		return nil, 0, err
	}
	conns := 0
	for _, line := range strings.Split(list, "\n") {
		for _, f := range strings.Fields(line) {
			if (strings.HasPrefix(f, "sub=") || strings.HasPrefix(f, "psub=")) && !strings.HasSuffix(f, "=0") {
				conns++
				break
			}
		}
	}
	return counts, conns, nil
}

// commands is INFO commandstats: calls by command.
func commands(ctx context.Context, rdb redis.UniversalClient) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls int64
		fmt.Sscanf(rest, "calls=%d", &calls)
		out[strings.TrimPrefix(name, "cmdstat_")] = calls
	}
	return out, nil
}
