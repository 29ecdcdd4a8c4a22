package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runMain runs the real main as the child process: its arguments come from
// WORKER_ARGS, as a shell would pass them, not the test binary's flags.
func runMain() {
	os.Args = append([]string{"worker"}, strings.Fields(os.Getenv("WORKER_ARGS"))...)
	main()
}

func TestWorker_probesAndGracefulShutdown(t *testing.T) {
	if testenv.ChildRole() == "worker" {
		runMain()
		return
	}
	redisSrv := testenv.StartRedis(t)
	addr := testenv.FreeAddr(t)
	base := "http://" + addr
	child := testenv.StartChild(t, "TestWorker_probesAndGracefulShutdown", "worker",
		"WORKER_HTTP_ADDR="+addr, "PAYMENT_PROVIDER=simulated", "REDIS_URL="+redisSrv.URL(), "MYSQL_DSN="+testenv.MySQL(t),
		"SHUTDOWN_TIMEOUT=5s")
	child.WaitHTTP(t, base+"/healthz", 30*time.Second)

	// The container health check, against the real worker.
	probe := testenv.StartChild(t, "TestWorker_probesAndGracefulShutdown", "worker",
		"WORKER_ARGS=healthcheck", "WORKER_HTTP_ADDR="+addr)
	if err := probe.Wait(); err != nil || !strings.Contains(probe.Output(), "healthy: GET http://"+addr+"/healthz: 200 OK") {
		t.Fatalf("worker healthcheck against a running worker: %v\n%s", err, probe.Output())
	}

	code, body := testenv.GetJSON(t, base+"/readyz")
	checks, _ := body["checks"].(map[string]any)
	if code != 200 || checks["redis"] != "ok" || checks["mysql"] != "ok" {
		t.Fatalf("/readyz: %d %v", code, body)
	}
	redisSrv.Pause()
	code, body = testenv.GetJSON(t, base+"/readyz")
	redisSrv.Resume()
	if checks, _ := body["checks"].(map[string]any); code != 503 || checks["redis"] == "ok" {
		t.Fatalf("/readyz with Redis paused: %d %v", code, body)
	}

	if err := child.Terminate(15 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, child.Output())
	}
}
