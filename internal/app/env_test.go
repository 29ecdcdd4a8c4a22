package app_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/invariants"
	"github.com/flashsale/flashsale/internal/lifecycle"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) {
	switch testenv.ChildRole() {
	case "worker":
		// A worker or an api as its own process, configured from the
		// environment like the real ones, for tests that kill them.
		lifecycle.Main("worker", app.NewWorker())
		return
	case "api":
		lifecycle.Main("api", app.NewAPI())
		return
	}
	testenv.Main(m)
}

// waits marks a test that spends most of its time waiting — payment times,
// retries' backoff, alerts' for:, a server down for seconds — on little CPU
// (an eighth to a half of one core, measured: 0.13-0.52): it runs beside the package's
// other such tests (t.Parallel; make test runs this package with -parallel
// 4), which took make test's long pole from 620 s to about half on a quiet
// machine (docs/testing.md). A test that is busy all the while (building
// binaries, saturating the api) stays sequential: beside others it would
// only slow them.
func waits(t *testing.T) {
	t.Helper()
	t.Parallel()
}

const (
	adminToken = "e2e-admin-token-0123456789abcdef0"
	// simulatedSecret signs the simulated payment provider's webhooks: the
	// tests send late payments and replays with it (paysim.Sign).
	simulatedSecret = "e2e-simulated-webhook-secret-0123456789"
	jwtSecret       = "e2e-secret-0123456789abcdef0123456789"
)

// stack is a running flashsale: an API in this process or as a child
// process (API_PROCESS), workers here or as child processes, on real Redis
// and MariaDB.
type stack struct {
	t        *testing.T
	redis    *testenv.RedisServer   // nil on a cluster or a sentinel group
	rc       *testenv.RedisCluster  // set instead of redis by newClusterStack
	sg       *testenv.SentinelGroup // set instead of redis with REDIS_SENTINEL
	extra    map[string]string      // newStackWith's overrides: the api's, workers' and child processes' too
	dsn      string
	db       *sql.DB
	api      *app.API       // the api in this process; nil with API_PROCESS
	apiChild *testenv.Child // the api as its own OS process, with API_PROCESS
	base     string
	tokens   *auth.Tokens
	client   *http.Client
	logs     io.Writer            // the api's and in-process workers' log; nil: stderr
	tp       trace.TracerProvider // traces the in-process api and workers; nil: none
}

func (s *stack) env() map[string]string {
	url, cluster, master := "", "false", ""
	switch {
	case s.rc != nil:
		url, cluster = s.rc.URL(), "true"
	case s.sg != nil:
		url, master = s.sg.URL(), s.sg.MasterName
	default:
		url = s.redis.URL()
	}
	env := map[string]string{
		"REDIS_URL": url, "REDIS_CLUSTER": cluster, "REDIS_SENTINEL_MASTER": master,
		"MYSQL_DSN": s.dsn, "JWT_SECRET": jwtSecret, "ADMIN_TOKEN": adminToken,
		"HTTP_ADDR": "127.0.0.1:0", "WORKER_HTTP_ADDR": "127.0.0.1:0", "RATE_LIMIT_USER_RPS": "0",
		"RATE_LIMIT_IP_RPS": "0", "LOG_LEVEL": "error", "SHUTDOWN_TIMEOUT": "5s",
		"PAYMENT_PROVIDER": "simulated", "SIMULATED_WEBHOOK_SECRET": simulatedSecret,
	}
	for k, v := range s.extra {
		env[k] = v
	}
	return env
}

// newStack starts Redis and an API on dsn (a fresh database when ""), and
// waits until the schema is migrated. Start workers with worker() or
// workerProcess().
func newStack(t *testing.T, dsn string) *stack {
	t.Helper()
	return newStackWith(t, dsn, nil)
}

// newStackWith is newStack with settings that override the test defaults,
// and three of the test's own: REDIS_SENTINEL (a primary, a replica and
// three sentinels), REDIS_APPENDFSYNC (one append-only server with that
// policy), API_PROCESS (the api runs as its own OS process, which the test
// can kill; s.api is nil then).
func newStackWith(t *testing.T, dsn string, overrides map[string]string) *stack {
	t.Helper()
	return startStack(t, dsn, overrides, nil, nil)
}

// newLoggedStack is newStack logging at debug level (a line for every
// request) into the returned buffer: the api's log and its in-process
// workers'.
func newLoggedStack(t *testing.T) (*stack, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	return startStack(t, "", map[string]string{"LOG_LEVEL": "debug"}, logs, nil), logs
}

// logBuffer is a log written by many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startStack starts a stack; tp, if set, traces its in-process api and
// workers (tracing_test.go).
func startStack(t *testing.T, dsn string, overrides map[string]string, logs io.Writer, tp trace.TracerProvider) *stack {
	t.Helper()
	if dsn == "" {
		dsn = testenv.MySQL(t)
	}
	s := &stack{t: t, dsn: dsn, logs: logs, tp: tp}
	apiProcess := overrides["API_PROCESS"] != ""
	delete(overrides, "API_PROCESS")
	switch {
	case overrides["REDIS_CLUSTER"] == "true":
		s.rc = testenv.StartRedisCluster(t, 3)
		delete(overrides, "REDIS_CLUSTER")
	case overrides["REDIS_SENTINEL"] != "":
		// A primary with one replica and three sentinels, append-only
		// (everysec) as operators run it.
		s.sg = testenv.StartSentinelGroup(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: "everysec"}, 1, 3)
		delete(overrides, "REDIS_SENTINEL")
	case overrides["REDIS_APPENDFSYNC"] != "":
		s.redis = testenv.StartRedisWith(t, testenv.RedisConfig{AppendOnly: true, AppendFsync: overrides["REDIS_APPENDFSYNC"]})
		delete(overrides, "REDIS_APPENDFSYNC")
	default:
		s.redis = testenv.StartRedis(t)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.db = db
	s.extra = overrides
	cfg, err := config.FromMap(s.env())
	if err != nil {
		t.Fatal(err)
	}
	if apiProcess {
		s.apiChild, s.base = s.apiProcess(t.Name())
	} else {
		s.api = &app.API{LogOutput: logs, TracerProvider: tp}
		if err := s.api.RunWith(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.api.Close() })
		s.base = "http://" + s.api.Addr
	}
	s.tokens, _ = auth.New(jwtSecret)
	s.client = &http.Client{Transport: apitest.Contract{T: t, Next: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}},
		Timeout: 30 * time.Second}
	testenv.WaitReady(t, s.base+"/readyz", 60*time.Second)
	return s
}

// newClusterStack is newStack on a 3-master Redis Cluster.
func newClusterStack(t *testing.T) *stack {
	t.Helper()
	return newStackWith(t, "", map[string]string{"REDIS_CLUSTER": "true"})
}

// rdb is a client of the stack's Redis: a cluster client on a cluster, a
// client of whichever server is primary on a sentinel group.
func (s *stack) rdb() redis.UniversalClient {
	switch {
	case s.rc != nil:
		return s.rc.Client(s.t)
	case s.sg != nil:
		c, err := connect.Redis(s.sg.URL(), connect.RedisMode{SentinelMaster: s.sg.MasterName})
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { c.Close() })
		return c
	}
	return s.redis.Client(s.t)
}

// worker starts a worker in this process.
func (s *stack) worker() *app.Worker {
	s.t.Helper()
	cfg, _ := config.FromMap(s.env())
	w := &app.Worker{LogOutput: s.logs, TracerProvider: s.tp}
	if err := w.RunWith(context.Background(), cfg); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { w.Close() })
	return w
}

// workerProcess starts a worker as its own OS process.
func (s *stack) workerProcess(test string) *testenv.Child {
	s.t.Helper()
	return testenv.StartChild(s.t, test, "worker", s.childEnv(nil)...)
}

// apiProcess starts a second api as its own OS process, on the same Redis
// and MySQL, and returns its base URL once it is ready.
func (s *stack) apiProcess(test string) (*testenv.Child, string) {
	s.t.Helper()
	addr := testenv.FreeAddr(s.t)
	c := testenv.StartChild(s.t, test, "api", s.childEnv(map[string]string{"HTTP_ADDR": addr})...)
	c.WaitHTTP(s.t, "http://"+addr+"/readyz", 60*time.Second)
	return c, "http://" + addr
}

// childEnv is env() as K=V, with overrides.
func (s *stack) childEnv(overrides map[string]string) []string {
	env := s.env()
	for k, v := range overrides {
		env[k] = v
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	return kv
}

type reply struct {
	code   int
	body   map[string]any
	header http.Header
}

func (r reply) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) str(k string) string { v, _ := r.body[k].(string); return v }

// call sends a request; auth is the whole Authorization header ("" for none).
func (s *stack) call(method, path, auth string, body string, headers ...string) reply {
	return s.callAt(s.base, method, path, auth, body, headers...)
}

// callAt is call to the api at base (one of several: apiProcess).
func (s *stack) callAt(base, method, path, auth string, body string, headers ...string) reply {
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &m) != nil {
		s.t.Errorf("%s %s: %d, body %q is not JSON", method, path, resp.StatusCode, raw)
	}
	return reply{code: resp.StatusCode, body: m, header: resp.Header}
}

func (s *stack) admin(method, path, body string) reply {
	return s.call(method, path, "Bearer "+adminToken, body)
}

func (s *stack) bearer(user int64) string {
	tok, err := s.tokens.Issue(user, time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return "Bearer " + tok
}

// sale creates and publishes a running flash sale and returns its id.
func (s *stack) sale(stock, limit, payTTLSeconds int) int64 {
	s.t.Helper()
	id, _ := s.publishedSale(stock, limit, payTTLSeconds, "")
	return id
}

// publishedSale creates a running flash sale, with extra JSON members
// (`,"shards":3`), publishes it, and returns its id and what its creation
// answered.
func (s *stack) publishedSale(stock, limit, payTTLSeconds int, extra string) (int64, map[string]any) {
	s.t.Helper()
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := s.admin("POST", "/admin/v1/activities", fmt.Sprintf(`{"type":"seckill","name":"e2e","sku":"E2E","price_cents":500,
		"total_stock":%d,"per_user_limit":%d,"starts_at":%q,"ends_at":%q,"payment_ttl_seconds":%d%s}`, stock, limit, start, end, payTTLSeconds, extra))
	if r.code != 201 {
		s.t.Fatalf("create activity: %d %v", r.code, r.body)
	}
	id := int64(r.body["id"].(float64))
	if r := s.admin("POST", fmt.Sprintf("/admin/v1/activities/%d/publish", id), ""); r.code != 200 {
		s.t.Fatalf("publish: %d %v", r.code, r.body)
	}
	return id, r.body
}

func (s *stack) order(user, activity int64, qty int, headers ...string) reply {
	return s.call("POST", fmt.Sprintf("/v1/activities/%d/orders", activity), s.bearer(user), fmt.Sprintf(`{"quantity":%d}`, qty), headers...)
}

// count runs a COUNT/SUM query on MySQL.
func (s *stack) count(query string, args ...any) int64 {
	s.t.Helper()
	var n sql.NullInt64
	if err := s.db.QueryRow(query, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", query, err)
	}
	return n.Int64
}

// waitPersisted waits until MySQL holds n orders of the activity.
func (s *stack) waitPersisted(activity int64, n int64, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.count("SELECT COUNT(*) FROM orders WHERE activity_id = ?", activity)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d of %d orders in MySQL after %v", got, n, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stockLeft reads the activity's live stock.
func (s *stack) stockLeft(activity int64) int64 {
	r := s.admin("GET", fmt.Sprintf("/admin/v1/activities/%d", activity), "")
	v, _ := r.body["stock_remaining"].(float64)
	return int64(v)
}

var _ = os.Getenv

// checkInvariants runs the invariant checker (internal/invariants, the one
// the load-test kit uses) on the activity, straight from Redis and MySQL:
// never oversold, nobody over the limit, every accepted order in MySQL
// exactly once, Redis and MySQL agree, and every one of the clients' 202s
// is an order (accepted < 0 skips that). MySQL follows Redis through the
// worker, so it checks again for up to 30 s before failing.
func (s *stack) checkInvariants(act, accepted int64) {
	s.t.Helper()
	rdb := s.rdb()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := invariants.Run(context.Background(), rdb, s.db, act,
			invariants.Options{Accepted: accepted, ExpectPersisted: true})
		if err != nil {
			s.t.Fatal(err)
		}
		if rep.OK() {
			s.t.Logf("\n%s", rep)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("invariants broken:\n%s", rep)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
