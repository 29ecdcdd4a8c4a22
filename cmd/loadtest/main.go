// Command loadtest is the load-test kit (`make loadtest`): it starts a stack
// of real processes on this machine — redis-server, mariadbd, 3 api
// processes behind nginx, 2 workers — or targets a URL, puts a flash sale on,
// drives wrk with rotating users and ab with one user's burst, waits for
// persistence, checks the invariants and prints a report. It exits 1 when an
// invariant broke.
//
//	go run ./cmd/loadtest                          # local stack, defaults
//	go run ./cmd/loadtest -duration 60s -conns 128 -users 50000 -stock 20000
//	go run ./cmd/loadtest -url https://shop.example -admin-token … -jwt-secret … \
//	    [-redis-url … -mysql-dsn …]                # a deployment; invariants need both
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/internal/loadtest"
)

func main() {
	var c loadtest.Config
	flag.StringVar(&c.URL, "url", "", "target deployment (default: start a local stack of processes)")
	flag.StringVar(&c.AdminURL, "admin-url", "", "with -url: where it serves /admin/v1, if not at -url (the compose stack: http://127.0.0.1:8081)")
	flag.StringVar(&c.AdminToken, "admin-token", os.Getenv("ADMIN_TOKEN"), "with -url: the deployment's ADMIN_TOKEN")
	flag.StringVar(&c.JWTSecret, "jwt-secret", os.Getenv("JWT_SECRET"), "with -url: the deployment's JWT_SECRET, to mint users' tokens")
	flag.StringVar(&c.RedisURL, "redis-url", "", "with -url: its Redis, to check the invariants")
	flag.BoolVar(&c.RedisCluster, "redis-cluster", false, "with -redis-url: it names a Redis Cluster (redis://a:6379?addr=b:6379&addr=c:6379)")
	flag.StringVar(&c.RedisMaster, "redis-sentinel-master", "", "with -redis-url: it names sentinels watching this primary")
	flag.BoolVar(&c.Sentinel, "sentinel", false, "local stack: Redis as a primary, a replica and three sentinels, with REDIS_ACK_REPLICAS=1 (as docker-compose.yml)")
	flag.DurationVar(&c.KillPrimaryAfter, "kill-primary-after", 0, "with -sentinel: kill -9 the Redis primary this long into the wrk run, and report the failover")
	flag.StringVar(&c.MySQLDSN, "mysql-dsn", "", "with -url: its MySQL, to check the invariants")
	flag.IntVar(&c.APIs, "apis", 3, "local stack: api processes behind nginx")
	flag.IntVar(&c.Workers, "workers", 2, "local stack: worker processes")
	flag.IntVar(&c.Users, "users", 20000, "distinct users wrk rotates through")
	flag.IntVar(&c.Stock, "stock", 10000, "units on sale")
	flag.IntVar(&c.Limit, "limit", 2, "units per user")
	flag.IntVar(&c.Items, "items", 1, "the sale's items (the stock split evenly; each order names the next in turn)")
	flag.DurationVar(&c.Duration, "duration", 0, "wrk run length (default 20s)")
	flag.IntVar(&c.Conns, "conns", 64, "wrk connections")
	flag.IntVar(&c.Threads, "threads", 2, "wrk threads")
	flag.IntVar(&c.ABRequests, "ab-requests", 5000, "ab: requests of one user's burst (0 skips ab)")
	flag.IntVar(&c.ABConns, "ab-conns", 50, "ab: concurrent requests")
	flag.DurationVar(&c.HeartbeatEvery, "heartbeat-every", 0, "during the wrk run, each user also sends a presence heartbeat this often (e.g. 30s; 0: none)")
	flag.DurationVar(&c.HeartbeatCostWindow, "heartbeat-cost-window", 0, "with -heartbeat-every: before the orders, idle this long, then send heartbeats alone this long, to measure their CPU (default 5s)")
	flag.IntVar(&c.Crowd, "crowd", 0, "after the other phases, a crowd of this many new shoppers in front of a sale with a waiting room (0: none)")
	flag.Float64Var(&c.CrowdStream, "crowd-stream", 0.5, "with -crowd: the share of shoppers who stream their place (the rest poll)")
	flag.IntVar(&c.CrowdAdmit, "crowd-admit", 200, "with -crowd: the waiting room's admit_per_second")
	flag.IntVar(&c.CrowdStock, "crowd-stock", 0, "with -crowd: its sale's units (default: half the crowd, so the rest are told it sold out)")
	flag.DurationVar(&c.CrowdStartsIn, "crowd-starts-in", 5*time.Second, "with -crowd: the sale starts this long after it is made; the crowd's first half arrives before")
	flag.DurationVar(&c.CrowdMaxPoll, "crowd-max-poll", 0, "with -crowd: cap a poller's gap (0: the server's poll_after_seconds)")
	hold := flag.Bool("stack-only", false, "start the local stack, print how to reach it, and wait for Ctrl-C (no load)")
	flag.Parse()
	c.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *hold {
		if err := holdStack(ctx, c); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
		return
	}
	rep, err := loadtest.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	fmt.Print(rep)
	if len(rep.Invariants) > 0 && !rep.OK() {
		os.Exit(1)
	}
}

// holdStack starts the local stack and keeps it up until ctx ends, for
// driving it by hand (curl, wrk, ab, pprof with DEBUG_ADDR).
func holdStack(ctx context.Context, c loadtest.Config) error {
	s, err := loadtest.StartLocalStack(ctx, c)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Printf("URL=%s\nADMIN_TOKEN=%s\nJWT_SECRET=%s\nREDIS_URL=%s\nREDIS_SENTINEL_MASTER=%s\nMYSQL_DSN=%s\n# logs in %s; Ctrl-C stops everything\n",
		s.URL, s.AdminToken, s.JWTSecret, s.RedisURL, s.RedisMaster, s.MySQLDSN, s.Dir)
	for _, p := range append(append([]*loadtest.Proc{}, s.APIs...), s.Workers...) {
		fmt.Printf("# %s pid %d on %s\n", p.Name, p.PID(), p.Addr)
	}
	<-ctx.Done()
	return nil
}
