package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// Sale is an activity the kit puts on sale.
type Sale struct {
	Type       string // seckill (default) or groupbuy
	Stock      int
	Limit      int
	PriceCents int
	PayTTL     time.Duration // default 15 minutes
	GroupSize  int           // a group buy's places per group
	GroupTTL   time.Duration // a group buy's time to fill a group
	Shards     int           // a flash sale's shards (activity.Shards); 0: the default, 1
	// Items is how many items the sale sells (ItemSKU's, the stock split
	// evenly, each at PriceCents); 0 or 1: one, in the flat form.
	Items int
	// AdmitPerSecond, above 0, puts a waiting room in front of the sale
	// letting in that many shoppers a second.
	AdmitPerSecond int
	// StartsIn is how long after now the sale starts (0: it started a
	// minute ago): a waiting room's early joiners are shuffled at the start.
	StartsIn time.Duration
}

// ItemSKU is the sku of a load-test sale's item i (from 0).
func ItemSKU(i int) string { return "LOAD-" + strconv.Itoa(i+1) }

// CreateSale creates and publishes a sale through the admin API at base and
// returns its id.
func CreateSale(ctx context.Context, base, adminToken string, s Sale) (int64, error) {
	if s.Type == "" {
		s.Type = "seckill"
	}
	if s.PriceCents == 0 {
		s.PriceCents = 990
	}
	if s.PayTTL == 0 {
		s.PayTTL = 15 * time.Minute
	}
	startsAt := time.Now().Add(-time.Minute)
	if s.StartsIn > 0 {
		startsAt = time.Now().Add(s.StartsIn)
	}
	fields := map[string]any{
		"type": s.Type, "name": "load test", "sku": "LOAD-1", "price_cents": s.PriceCents,
		"total_stock": s.Stock, "per_user_limit": s.Limit,
		"starts_at": startsAt.UTC().Format(time.RFC3339Nano), "ends_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"payment_ttl_seconds": int(s.PayTTL.Seconds()),
	}
	if s.Type == "groupbuy" {
		fields["group_size"], fields["group_ttl_seconds"] = s.GroupSize, int(s.GroupTTL.Seconds())
	}
	if s.Shards > 0 {
		fields["shards"] = s.Shards
	}
	if s.AdmitPerSecond > 0 {
		fields["waiting_room"], fields["admit_per_second"] = true, s.AdmitPerSecond
	}
	if s.Items > 1 {
		delete(fields, "sku")
		delete(fields, "price_cents")
		delete(fields, "total_stock")
		items := make([]map[string]any, s.Items)
		for i := range items {
			stock := s.Stock / s.Items
			if i < s.Stock%s.Items {
				stock++
			}
			items[i] = map[string]any{"sku": ItemSKU(i), "label": "item " + strconv.Itoa(i+1), "price_cents": s.PriceCents, "stock": stock}
		}
		fields["items"] = items
	}
	body, _ := json.Marshal(fields)
	var created struct {
		ID int64 `json:"id"`
	}
	if err := adminCall(ctx, "POST", base+"/admin/v1/activities", adminToken, body, 201, &created); err != nil {
		return 0, err
	}
	if err := adminCall(ctx, "POST", fmt.Sprintf("%s/admin/v1/activities/%d/publish", base, created.ID), adminToken, nil, 200, nil); err != nil {
		return 0, err
	}
	return created.ID, nil
}

func adminCall(ctx context.Context, method, url, token string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// WriteTokens writes "user_id<TAB>token" lines for users from..from+n-1
// (valid for ttl) into path.
func WriteTokens(path, secret string, from int64, n int, ttl time.Duration) error {
	tokens, err := auth.New(secret)
	if err != nil {
		return err
	}
	return writeTokens(path, tokens, consecutive(from, n), 0, 1, ttl, nil)
}

// consecutive is users from..from+n-1.
func consecutive(from int64, n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = from + int64(i)
	}
	return ids
}

// WriteUserTokenFiles writes users ids as WriteTokens does, in their order,
// into parts files path.0 … path.<parts-1>, ids[i] in file i%parts: the
// orders script's "once" mode (WrkRun.Once) gives wrk's thread i file i,
// so no two threads send the same user. The files are written in parallel
// (minting a token takes about 4 µs: 600,000 of them, 2.3 s on one core).
//
// With sale not 0, each line also carries the user's admission to sale
// ("user<TAB>token<TAB>admission", good for ttl), signed as the api signs
// them when ADMISSION_SECRET is unset (waitingroom.DeriveSecret of secret),
// which the orders script sends as Admission-Token: shoppers who have been
// through the room, without the room's traffic (a benchmark of the order
// path).
func WriteUserTokenFiles(path, secret string, ids []int64, parts int, ttl time.Duration, sale int64) error {
	if parts <= 0 {
		return fmt.Errorf("loadtest: %d token files", parts)
	}
	tokens, err := auth.New(secret)
	if err != nil {
		return err
	}
	var admit func(user int64) (string, error)
	if sale != 0 {
		signer, err := waitingroom.NewSigner(waitingroom.DeriveSecret(secret))
		if err != nil {
			return err
		}
		until := time.Now().Add(ttl)
		admit = func(user int64) (string, error) { return signer.Issue(user, sale, until) }
	}
	errs := make(chan error, parts)
	for p := range parts {
		go func() {
			errs <- writeTokens(path+"."+strconv.Itoa(p), tokens, ids, p, parts, ttl, admit)
		}()
	}
	for range parts {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// writeTokens writes users ids[from], ids[from+step], … into path, a line
// each; with admit, each line ends with the user's admission.
func writeTokens(path string, tokens *auth.Tokens, ids []int64, from, step int, ttl time.Duration, admit func(int64) (string, error)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := from; i < len(ids); i += step {
		id := ids[i]
		tok, err := tokens.Issue(id, ttl)
		if err != nil {
			f.Close()
			return err
		}
		if admit == nil {
			fmt.Fprintf(w, "%d\t%s\n", id, tok)
			continue
		}
		adm, err := admit(id)
		if err != nil {
			f.Close()
			return err
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", id, tok, adm)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WrkRun is one wrk run placing orders.
type WrkRun struct {
	URL        string // base URL
	Activity   int64
	TokensFile string
	Threads    int
	Conns      int
	Duration   time.Duration
	Quantity   int
	Dir        string // where the script is written
	Path       string // instead of /v1/activities/<id>/orders
	// Once sends every user once: thread i reads TokensFile.<i>
	// (WriteUserTokenFiles, parts = Threads), a line a request, and Result.Reused
	// counts the requests after a file ran out and started again.
	Once bool
	// Stop, if set, ends the run early when it closes: wrk is interrupted
	// (SIGINT), and prints its summary of the time it ran.
	Stop <-chan struct{}
	// Items, when above 1, has each request name the next of a sale's
	// items (ItemSKU) in turn.
	Items int
	// Get sends GET to Path with no body (not with Once): a waiting room's
	// poll.
	Get bool
}

// Result is what a load generator saw.
type Result struct {
	Tool     string
	Requests int64
	Seconds  float64
	P50, P90 time.Duration
	P99, Max time.Duration
	Codes    map[string]int64 // answers: "202", "409 SOLD_OUT", …; ab: "2xx", "other"
	Errors   int64            // connect/read/write errors and timeouts
	Output   string           // the tool's own output
	// Reused counts requests that sent a user a second time in a wrk run
	// with WrkRun.Once: its token files ran out.
	Reused int64
	// CPU is the load generator's own CPU time, user and system (its
	// process's rusage), to report apart from the service's.
	CPU time.Duration
}

// RPS is requests a second.
func (r Result) RPS() float64 {
	if r.Seconds == 0 {
		return 0
	}
	return float64(r.Requests) / r.Seconds
}

// RunWrk runs wrk with the orders script.
func RunWrk(ctx context.Context, w WrkRun) (Result, error) {
	if w.Quantity == 0 {
		w.Quantity = 1
	}
	script := filepath.Join(w.Dir, "orders.lua")
	if err := os.WriteFile(script, []byte(WrkOrders), 0o644); err != nil {
		return Result{}, err
	}
	args := []string{"-t" + strconv.Itoa(w.Threads), "-c" + strconv.Itoa(w.Conns), "-d" + wrkSeconds(w.Duration),
		"--timeout", "10s", "-s", script, w.URL, "--", strconv.FormatInt(w.Activity, 10), w.TokensFile, strconv.Itoa(w.Quantity)}
	if w.Once || w.Path != "" || w.Items > 1 || w.Get {
		path, mode := w.Path, "-" // "-": the script's default path, no mode
		if path == "" {
			path = "-"
		}
		if w.Once {
			mode = "once"
		}
		if w.Get {
			mode = "get"
		}
		args = append(args, path, mode)
		if w.Items > 1 {
			args = append(args, strconv.Itoa(w.Items))
		}
	}
	cmd := exec.CommandContext(ctx, "wrk", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("wrk: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	if w.Stop != nil {
		go func() {
			select {
			case <-w.Stop:
				_ = cmd.Process.Signal(os.Interrupt)
			case <-done:
			}
		}()
	}
	if err := cmd.Wait(); err != nil {
		return Result{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	r, err := parseWrk(out.String())
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, err
}

// wrkSeconds is d as wrk reads a duration: whole seconds ("1m0s", Go's
// way of writing a minute, is not one).
func wrkSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}

func parseWrk(out string) (Result, error) {
	i := strings.Index(out, "FLASHSALE ")
	if i < 0 {
		return Result{}, fmt.Errorf("wrk printed no FLASHSALE line:\n%s", out)
	}
	line := out[i+len("FLASHSALE "):]
	if j := strings.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var v struct {
		Requests int64            `json:"requests"`
		Seconds  float64          `json:"seconds"`
		P50      int64            `json:"p50_us"`
		P90      int64            `json:"p90_us"`
		P99      int64            `json:"p99_us"`
		Max      int64            `json:"max_us"`
		Codes    map[string]int64 `json:"codes"`
		Reused   int64            `json:"reused"`
		Errors   map[string]int64 `json:"errors"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return Result{}, fmt.Errorf("wrk FLASHSALE line %q: %w", line, err)
	}
	us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
	r := Result{Tool: "wrk", Requests: v.Requests, Seconds: v.Seconds, Codes: v.Codes, Output: out, Reused: v.Reused,
		P50: us(v.P50), P90: us(v.P90), P99: us(v.P99), Max: us(v.Max)}
	for _, n := range v.Errors {
		r.Errors += n
	}
	r.Errors -= v.Errors["status"] // non-2xx answers are answers, counted by code
	return r, nil
}

// ABRun is one ab run: n requests from one user (ab cannot rotate users),
// c at a time, keep-alive.
type ABRun struct {
	URL      string
	Activity int64
	Token    string
	N, C     int
	Dir      string
}

// RunAB runs ab placing orders as one user.
func RunAB(ctx context.Context, a ABRun) (Result, error) {
	body := filepath.Join(a.Dir, "order.json")
	if err := os.WriteFile(body, []byte(`{"quantity":1}`), 0o644); err != nil {
		return Result{}, err
	}
	args := []string{"-n", strconv.Itoa(a.N), "-c", strconv.Itoa(a.C), "-k", "-q", "-s", "10",
		"-p", body, "-T", "application/json", "-H", "Authorization: Bearer " + a.Token,
		fmt.Sprintf("%s/v1/activities/%d/orders", a.URL, a.Activity)}
	out, err := exec.CommandContext(ctx, "ab", args...).CombinedOutput()
	if err != nil {
		return Result{}, fmt.Errorf("ab: %w\n%s", err, out)
	}
	return parseAB(string(out))
}

var (
	abComplete = regexp.MustCompile(`Complete requests:\s+(\d+)`)
	abNon2xx   = regexp.MustCompile(`Non-2xx responses:\s+(\d+)`)
	abTime     = regexp.MustCompile(`Time taken for tests:\s+([\d.]+) seconds`)
	abPct      = regexp.MustCompile(`(?m)^\s+(50|90|99|100)%\s+(\d+)`)
)

func parseAB(out string) (Result, error) {
	m := abComplete.FindStringSubmatch(out)
	t := abTime.FindStringSubmatch(out)
	if m == nil || t == nil {
		return Result{}, fmt.Errorf("cannot read ab's output:\n%s", out)
	}
	r := Result{Tool: "ab", Codes: map[string]int64{}, Output: out}
	r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.Seconds, _ = strconv.ParseFloat(t[1], 64)
	non2xx := int64(0)
	if f := abNon2xx.FindStringSubmatch(out); f != nil {
		non2xx, _ = strconv.ParseInt(f[1], 10, 64)
	}
	// ab tells 2xx from the rest, nothing finer.
	r.Codes["2xx"] = r.Requests - non2xx
	if non2xx > 0 {
		r.Codes["other"] = non2xx
	}
	for _, p := range abPct.FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.ParseInt(p[2], 10, 64)
		d := time.Duration(ms) * time.Millisecond
		switch p[1] {
		case "50":
			r.P50 = d
		case "90":
			r.P90 = d
		case "99":
			r.P99 = d
		case "100":
			r.Max = d
		}
	}
	return r, nil
}
