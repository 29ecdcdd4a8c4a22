package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/invariants"
)

// startEmbedded runs an API in embedded mode (no REDIS_URL, no MYSQL_DSN)
// with env added, and returns it with what it printed for the demo and a
// close func that may be called early (it runs once).
func startEmbedded(t *testing.T, env map[string]string) (*app.API, string, func()) {
	t.Helper()
	m := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "LOG_LEVEL": "error", "SHUTDOWN_TIMEOUT": "5s"}
	for k, v := range env {
		m[k] = v
	}
	cfg, err := config.FromMap(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	api := &app.API{Out: &out}
	var once sync.Once
	closeAPI := func() {
		once.Do(func() {
			if err := api.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(closeAPI)
	if err := api.RunWith(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return api, out.String(), closeAPI
}

// Embedded mode sets up a demo flash sale and group buy and prints commands;
// every one of them, run with bash as printed, does what its comment says,
// and the crowd of the wrk command neither oversells nor lets a user take
// more than the limit. In both modes: redis-server and mariadbd as child
// processes, and in memory.
func TestEmbedded_printedCommandsWorkAsPrinted(t *testing.T) {
	for mode, says := range map[string]string{
		"servers": "Redis and MySQL run as child processes of this one (redis-server and mariadbd, their files in /",
		"memory":  "Redis and MySQL run IN MEMORY inside this process (sales of at most 2000 units)",
	} {
		t.Run(mode, func(t *testing.T) { printedCommandsWorkAsPrinted(t, mode, says) })
	}
}

func printedCommandsWorkAsPrinted(t *testing.T, mode, says string) {
	api, block, closeAPI := startEmbedded(t, map[string]string{"EMBEDDED_MODE": mode})
	if api.Config.RateLimitIPRPS != 0 || api.Config.RateLimitUserRPS != 10 {
		t.Errorf("embedded rate limits: per IP %d, per user %d; want 0 (off by default) and 10",
			api.Config.RateLimitIPRPS, api.Config.RateLimitUserRPS)
	}
	for _, want := range []string{says, "LOST when it exits", "ADMIN=" + api.Config.AdminToken + "\n",
		"per user 10 requests/s", "per client IP off"} {
		if !strings.Contains(block, want) {
			t.Fatalf("the printed block lacks %q:\n%s", want, block)
		}
	}
	sale := atoi(t, regexp.MustCompile(`Demo flash sale (\d+) `).FindStringSubmatch(block))
	groupBuy := atoi(t, regexp.MustCompile(`Demo group buy (\d+) `).FindStringSubmatch(block))
	dir := regexp.MustCompile(`In (\S+): tokens\.txt`).FindStringSubmatch(block)
	if len(dir) != 2 {
		t.Fatalf("no demo directory in:\n%s", block)
	}
	tokens, err := os.ReadFile(dir[1] + "/tokens.txt")
	if err != nil || bytes.Count(tokens, []byte("\n")) != 2000 || !bytes.HasPrefix(tokens, []byte("1\teyJ")) {
		t.Fatalf("tokens.txt: %v, %d lines", err, bytes.Count(tokens, []byte("\n")))
	}

	// Run the block as a bash script, marking where each command's output
	// starts.
	var script strings.Builder
	var cmds []string
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fmt.Fprintf(&script, "echo '@@@ %d'\n%s\n", len(cmds), line)
		cmds = append(cmds, line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-e", "-c", script.String())
	var out bytes.Buffer
	sh.Stdout, sh.Stderr = &out, &out
	for _, kv := range os.Environ() { // a proxy in the environment is not the user's
		if !strings.Contains(strings.ToLower(strings.SplitN(kv, "=", 2)[0]), "proxy") {
			sh.Env = append(sh.Env, kv)
		}
	}
	start := time.Now()
	if err := sh.Run(); err != nil {
		t.Fatalf("bash: %v\n%s", err, out.String())
	}
	t.Logf("the printed commands ran in %v", time.Since(start).Round(time.Millisecond))
	outputs := regexp.MustCompile(`(?m)^@@@ \d+\n`).Split(out.String(), -1)[1:]
	if len(outputs) != len(cmds) {
		t.Fatalf("%d outputs of %d commands:\n%s", len(outputs), len(cmds), out.String())
	}

	var orderNo string
	checked := map[string]bool{}
	for i, cmd := range cmds {
		got := outputs[i]
		expect := func(kind string, wants ...string) {
			checked[kind] = true
			for _, w := range wants {
				if !strings.Contains(got, w) {
					t.Errorf("%s: %s\nprinted %q, want %q in it", kind, cmd, got, w)
				}
			}
		}
		switch {
		case regexp.MustCompile(`^(ADMIN|T[123])=\S+$`).MatchString(cmd):
			checked[cmd[:strings.Index(cmd, "=")]] = true
		case strings.HasPrefix(cmd, "ORDER="):
			m := regexp.MustCompile(`"order_no":"(\d+-\w+)"`).FindStringSubmatch(got)
			if len(m) != 2 {
				t.Fatalf("place order: no order_no in %q", got)
			}
			orderNo = m[1]
			expect("place order", `"status":"pending_payment"`, " HTTP 202")
		case strings.HasSuffix(cmd, "/v1/activities/"+strconv.Itoa(sale)):
			expect("public view", fmt.Sprintf(`"id":%d,`, sale), `"stock_remaining":1000`, " HTTP 200")
		case strings.Contains(cmd, "/v1/orders/$ORDER/pay"):
			expect("pay", `"order_no":"`+orderNo+`"`, `"status":"paid"`, " HTTP 200")
		case strings.Contains(cmd, "/v1/orders/$ORDER "):
			expect("get order", `"order_no":"`+orderNo+`"`, `"status":"pending_payment"`, " HTTP 200")
		case strings.HasPrefix(cmd, "GROUP="):
			expect("open group", fmt.Sprintf(`"group_id":"%d-`, groupBuy), " HTTP 202")
		case strings.Contains(cmd, "/join "):
			expect("join group", fmt.Sprintf(`"group_id":"%d-`, groupBuy), `"order_no":"`, " HTTP 202")
		case strings.Contains(cmd, "/v1/groups/$GROUP "):
			expect("view group", `"members_count":2`, `"size":3`, `"status":"forming"`, " HTTP 200")
		case strings.Contains(cmd, "/admin/v1/activities/"):
			expect("admin view", fmt.Sprintf(`"id":%d,`, sale), `"orders_accepted":1,`, " HTTP 200")
		case strings.HasPrefix(cmd, "ab "):
			expect("ab", "Non-2xx responses:")
			if !regexp.MustCompile(`Complete requests:\s+2000\n`).MatchString(got) {
				t.Errorf("ab: %s\nprinted %q, want 2000 complete requests", cmd, got)
			}
			// Its "Failed requests" are answers of another length than the
			// first, as the block says above the command.
			m := regexp.MustCompile(`Failed requests:\s+(\d+)\n\s+\(Connect: 0, Receive: 0, Length: (\d+), Exceptions: 0\)`).FindStringSubmatch(got)
			if m == nil || m[1] != m[2] || !strings.Contains(block, `"Failed requests: ... (Length: ...)" are those answers too`) {
				t.Errorf("ab: %s\nprinted %q; want its failed requests all of length, and the block to say why", cmd, got)
			}
		case strings.HasPrefix(cmd, "wrk "):
			checked["wrk"] = true
			checkWrk(t, got)
		default:
			t.Errorf("a printed command the test does not check: %s", cmd)
		}
	}
	if len(checked) != 14 {
		t.Errorf("checked %d kinds of command, want 14: %v", len(checked), checked)
	}

	// After the crowd: never oversold, nobody over the limit of 1, and
	// Redis's figures add up. wrk has hung up, but requests it sent may still
	// be running in the api (CI once read stock_remaining, then saw 7 more
	// orders land before it read the holders), so the two figures are read
	// as one snapshot.
	d := adminView(t, api, sale)
	if remaining, accepted := int64(d["stock_remaining"].(float64)), int64(d["orders_accepted"].(float64)); remaining < 0 || accepted > 1000 || accepted < 2 {
		t.Errorf("after wrk: stock_remaining %d, orders_accepted %d (of 1000)", remaining, accepted)
	}
	opt, err := redis.ParseURL(api.Config.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	remaining, holders, err := invariants.Holdings(context.Background(), rdb, int64(sale))
	if err != nil {
		t.Fatal(err)
	}
	var units int64
	for user, n := range holders {
		u, _ := strconv.ParseInt(n, 10, 64)
		if u > 1 {
			t.Errorf("user %s holds %d units; the limit is 1", user, u)
		}
		units += u
	}
	if remaining < 0 || units != 1000-remaining {
		t.Errorf("users hold %d units, but %d of 1000 are gone", units, 1000-remaining)
	}
	// The in-process worker records every accepted order in MySQL, and
	// the admin view answers meanwhile: the in-memory SQL server runs one
	// statement at a time, but a read waits for the one write running
	// only, not for every one queued (until issue 39 a view there could
	// take past REQUEST_TIMEOUT and answer 503).
	// 20 s; three times that under the race detector, which slows the
	// pure-Go SQL server several times (and CI runs two packages at once).
	within := 20 * time.Second
	if raceOn {
		within *= 3
	}
	// A 503 is the contract's "try again" and is taken as such, once or
	// twice in a row: on a loaded CI machine under -race one statement of
	// the worker's can outlast REQUEST_TIMEOUT (3 s) now and then (CI once
	// failed here at its first 503). Three in a row — 9 s with no answer —
	// is the wedge of issue 39 and fails.
	deadline := time.Now().Add(within)
	unanswered := 0
	for {
		code, d := getAdminView(t, api, sale)
		if code == 200 && d["reconciliation"].(map[string]any)["in_sync"] == true {
			break
		}
		if code == 503 {
			unanswered++
		} else {
			unanswered = 0
		}
		if (code != 200 && code != 503) || unanswered >= 3 || time.Now().After(deadline) {
			t.Fatalf("Redis and MySQL not in sync within %v after wrk (%d answers of 503 in a row): %d %v", within, unanswered, code, d)
		}
		time.Sleep(100 * time.Millisecond)
	}

	closeAPI()
	if _, err := os.Stat(dir[1]); !os.IsNotExist(err) {
		t.Errorf("demo directory %s after Close: %v", dir[1], err)
	}
}

// checkWrk reads wrk's FLASHSALE line: orders were accepted, and every
// connection was made.
func checkWrk(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^FLASHSALE (\{.*\})$`).FindStringSubmatch(out)
	if len(m) != 2 {
		t.Errorf("wrk printed no FLASHSALE line:\n%s", out)
		return
	}
	var res struct {
		Codes  map[string]int `json:"codes"`
		Errors map[string]int `json:"errors"`
	}
	if err := json.Unmarshal([]byte(m[1]), &res); err != nil {
		t.Errorf("FLASHSALE line %s: %v", m[1], err)
		return
	}
	if res.Codes["202"] == 0 || res.Errors["connect"] != 0 || res.Errors["timeout"] != 0 {
		t.Errorf("wrk: %s; want some 202s and no connect errors or timeouts", m[1])
	}
	t.Logf("wrk: %s", m[1])
}

func adminView(t *testing.T, api *app.API, id int) map[string]any {
	t.Helper()
	code, d := getAdminView(t, api, id)
	if code != 200 {
		t.Fatalf("admin view: %d %v", code, d)
	}
	return d
}

// getAdminView is the admin view's status and JSON body, whatever they are.
func getAdminView(t *testing.T, api *app.API, id int) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/admin/v1/activities/%d", api.Addr, id), nil)
	req.Header.Set("Authorization", "Bearer "+api.Config.AdminToken)
	resp, err := apitest.Client(t).Do(req) // the answer checked against the OpenAPI document
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("admin view: %d %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, d
}

func atoi(t *testing.T, m []string) int {
	t.Helper()
	if len(m) != 2 {
		t.Fatalf("no id: %v", m)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A RATE_LIMIT_IP_RPS given is kept in embedded mode, and the block says so;
// the admin token it makes up is long enough for the config's own check.
func TestEmbedded_ipRateLimitGiven_isKept(t *testing.T) {
	api, block, _ := startEmbedded(t, map[string]string{"RATE_LIMIT_IP_RPS": "100"})
	if api.Config.RateLimitIPRPS != 100 || !strings.Contains(block, "per client IP 100 requests/s") {
		t.Fatalf("RATE_LIMIT_IP_RPS=100: in force %d; block:\n%s", api.Config.RateLimitIPRPS, block)
	}
	if tok := api.Config.AdminToken; len(tok) < config.MinAdminTokenLen || config.CheckAdminToken(tok) != nil {
		t.Fatalf("the made-up ADMIN_TOKEN %q is shorter than %d bytes", tok, config.MinAdminTokenLen)
	}
}

// An ADMIN_TOKEN shorter than 32 bytes stops the api before it connects to
// anything, with the config's message, however its Config was made.
func TestAPI_shortAdminToken_refusedAtStart(t *testing.T) {
	api := &app.API{LogOutput: io.Discard}
	err := api.RunWith(context.Background(), config.Config{AdminToken: "s3cret", RedisURL: "redis://127.0.0.1:1", MySQLDSN: "x"})
	if err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN is 6 bytes: want at least 32") {
		t.Fatalf("RunWith with a 6-byte ADMIN_TOKEN: %v", err)
	}
	if api.Addr != "" {
		t.Fatalf("listening on %s", api.Addr)
	}
}
