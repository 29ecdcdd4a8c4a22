package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/auth"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const jwtSecret = "test-secret-0123456789abcdef0123456789"

// runMain runs the real main as the child process: its arguments come from
// API_ARGS, as a shell would pass them, not the test binary's flags.
func runMain() {
	os.Args = append([]string{"api"}, strings.Fields(os.Getenv("API_ARGS"))...)
	main()
}

// The real binary, as a separate process: probes follow its dependencies, and
// SIGTERM shuts it down cleanly.
func TestAPI_probesAndGracefulShutdown(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	redisSrv := testenv.StartRedis(t)
	addr := testenv.FreeAddr(t)
	base := "http://" + addr
	child := testenv.StartChild(t, "TestAPI_probesAndGracefulShutdown", "api",
		"HTTP_ADDR="+addr, "REDIS_URL="+redisSrv.URL(), "MYSQL_DSN="+testenv.MySQL(t), "JWT_SECRET="+jwtSecret, "PAYMENT_PROVIDER=simulated")
	child.WaitHTTP(t, base+"/healthz", 30*time.Second)

	if code, body := testenv.GetJSON(t, base+"/healthz"); code != 200 || body["status"] != "ok" {
		t.Fatalf("/healthz: %d %v", code, body)
	}
	// The container health check, against the real server.
	probe := testenv.StartChild(t, "TestAPI_probesAndGracefulShutdown", "api", "API_ARGS=healthcheck", "HTTP_ADDR="+addr)
	if err := probe.Wait(); err != nil || !strings.Contains(probe.Output(), "healthy: GET http://"+addr+"/healthz: 200 OK") {
		t.Fatalf("api healthcheck against a running api: %v\n%s", err, probe.Output())
	}
	testenv.WaitReady(t, base+"/readyz", 30*time.Second)
	code, body := testenv.GetJSON(t, base+"/readyz")
	checks, _ := body["checks"].(map[string]any)
	if code != 200 || checks["redis"] != "ok" || checks["mysql"] != "ok" || checks["migrations"] != "ok" {
		t.Fatalf("/readyz with both up: %d %v", code, body)
	}

	redisSrv.Kill()
	code, body = testenv.GetJSON(t, base+"/readyz")
	checks, _ = body["checks"].(map[string]any)
	errBody, _ := body["error"].(map[string]any)
	if code != 503 || checks["redis"] != "unavailable" || checks["mysql"] != "ok" || errBody["code"] != "UNAVAILABLE" {
		t.Fatalf("/readyz with Redis down: %d %v", code, body)
	}
	// What failed is named; where it runs is not (a driver's error names the
	// host and port).
	if raw := fmt.Sprint(body); strings.Contains(raw, redisSrv.Addr()) || strings.Contains(raw, "127.0.0.1") {
		t.Fatalf("/readyz shows the deployment's addresses: %v", body)
	}
	if code, _ := testenv.GetJSON(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz with Redis down: %d; the process is up", code)
	}

	redisSrv.Restart()
	if code, body := testenv.GetJSON(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz after Redis came back: %d %v", code, body)
	}

	code, body = testenv.GetJSON(t, base+"/no/such/route")
	if errBody, _ := body["error"].(map[string]any); code != 404 || errBody["code"] != "NOT_FOUND" {
		t.Fatalf("unknown route: %d %v", code, body)
	}

	if err := child.Terminate(10 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, child.Output())
	}
}

func TestAPI_mysqlUnreachable_isNotReadyButServes(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	redisSrv := testenv.StartRedis(t)
	addr := testenv.FreeAddr(t)
	deadMySQL := "root@tcp(" + testenv.FreeAddr(t) + ")/nothing"
	child := testenv.StartChild(t, "TestAPI_mysqlUnreachable_isNotReadyButServes", "api",
		"HTTP_ADDR="+addr, "REDIS_URL="+redisSrv.URL(), "MYSQL_DSN="+deadMySQL, "JWT_SECRET="+jwtSecret, "PAYMENT_PROVIDER=simulated")
	child.WaitHTTP(t, "http://"+addr+"/healthz", 30*time.Second)
	code, body := testenv.GetJSON(t, "http://"+addr+"/readyz")
	checks, _ := body["checks"].(map[string]any)
	if code != 503 || checks["redis"] != "ok" || checks["mysql"] == "ok" {
		t.Fatalf("/readyz with MySQL down: %d %v", code, body)
	}
}

// With nothing configured the api runs on its embedded Redis and SQL server.
func TestAPI_nothingConfigured_runsEmbedded(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	addr := testenv.FreeAddr(t)
	child := testenv.StartChild(t, "TestAPI_nothingConfigured_runsEmbedded", "api",
		"HTTP_ADDR="+addr, "REDIS_URL=", "MYSQL_DSN=")
	child.WaitHTTP(t, "http://"+addr+"/healthz", 60*time.Second)
	testenv.WaitReady(t, "http://"+addr+"/readyz", 30*time.Second)
	code, body := testenv.GetJSON(t, "http://"+addr+"/readyz")
	if checks, _ := body["checks"].(map[string]any); code != 200 || checks["redis"] != "ok" || checks["mysql"] != "ok" {
		t.Fatalf("/readyz in embedded mode: %d %v", code, body)
	}
	if !strings.Contains(child.Output(), "EMBEDDED MODE") {
		t.Fatalf("embedded mode was not announced:\n%s", child.Output())
	}
}

func TestAPI_onlyOneOfRedisAndMySQL_refusesToStart(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	child := testenv.StartChild(t, "TestAPI_onlyOneOfRedisAndMySQL_refusesToStart", "api",
		"HTTP_ADDR="+testenv.FreeAddr(t), "REDIS_URL=redis://127.0.0.1:1/0", "MYSQL_DSN=")
	if err := child.Wait(); err == nil || !strings.Contains(child.Output(), "set both REDIS_URL and MYSQL_DSN") {
		t.Fatalf("exit %v, output:\n%s", err, child.Output())
	}
}

// `api migrate` applies and rolls back by hand; the server migrates at start.
func TestAPI_migrateCommand_andMigrationAtStart(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	dsn := testenv.MySQL(t)
	run := func(args ...string) string {
		child := testenv.StartChild(t, "TestAPI_migrateCommand_andMigrationAtStart", "api", "MYSQL_DSN="+dsn, "API_ARGS="+strings.Join(args, " "))
		if err := child.Wait(); err != nil {
			t.Fatalf("api %v: %v\n%s", args, err, child.Output())
		}
		return child.Output()
	}
	latest := migrations.Latest()
	if out := run("migrate", "up"); !strings.Contains(out, fmt.Sprintf("schema version %d\n", latest)) {
		t.Fatalf("migrate up:\n%s", out)
	}
	if out := run("migrate", "down"); !strings.Contains(out, fmt.Sprintf("schema version %d\n", latest-1)) {
		t.Fatalf("migrate down:\n%s", out)
	}

	// Starting the server applies what is pending.
	redisSrv := testenv.StartRedis(t)
	addr := testenv.FreeAddr(t)
	child := testenv.StartChild(t, "TestAPI_migrateCommand_andMigrationAtStart", "api",
		"HTTP_ADDR="+addr, "REDIS_URL="+redisSrv.URL(), "MYSQL_DSN="+dsn, "ADMIN_TOKEN=test-admin-token-0123456789abcdef", "JWT_SECRET="+jwtSecret, "PAYMENT_PROVIDER=simulated")
	child.WaitHTTP(t, "http://"+addr+"/healthz", 30*time.Second)
	testenv.WaitReady(t, "http://"+addr+"/readyz", 30*time.Second)
	if out := run("migrate", "status"); !strings.Contains(out, fmt.Sprintf("schema version %d\n", latest)) {
		t.Fatalf("after the server started:\n%s", out)
	}
}

func TestAPI_tokenCommand_printsVerifiableTokens(t *testing.T) {
	if testenv.ChildRole() == "api" {
		runMain()
		return
	}
	run := func(args string) string {
		child := testenv.StartChild(t, "TestAPI_tokenCommand_printsVerifiableTokens", "api", "API_ARGS="+args, "JWT_SECRET="+jwtSecret, "PAYMENT_PROVIDER=simulated")
		if err := child.Wait(); err != nil {
			t.Fatalf("api %s: %v\n%s", args, err, child.Output())
		}
		var lines []string
		for _, l := range strings.Split(child.Output(), "\n") { // drop the test runner's own lines
			if l != "" && !strings.HasPrefix(l, "===") && !strings.HasPrefix(l, "---") && l != "PASS" && !strings.HasPrefix(l, "ok") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	tokens, _ := auth.New(jwtSecret)
	if id, err := tokens.Verify(run("token --user 42 --ttl 1h")); err != nil || id != 42 {
		t.Fatalf("token --user 42: %d, %v", id, err)
	}
	lines := strings.Split(run("token --users 3 --from 10"), "\n")
	if len(lines) != 3 {
		t.Fatalf("token --users 3: %q", lines)
	}
	for i, l := range lines {
		id, tok, _ := strings.Cut(l, "\t")
		if uid, err := tokens.Verify(tok); err != nil || fmt.Sprint(uid) != id || uid != int64(10+i) {
			t.Fatalf("line %q: %d, %v", l, uid, err)
		}
	}
}
