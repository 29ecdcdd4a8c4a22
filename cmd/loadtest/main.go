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

	"github.com/flashsale/flashsale/internal/loadtest"
)

func main() {
	var c loadtest.Config
	flag.StringVar(&c.URL, "url", "", "target deployment (default: start a local stack of processes)")
	flag.StringVar(&c.AdminToken, "admin-token", os.Getenv("ADMIN_TOKEN"), "with -url: the deployment's ADMIN_TOKEN")
	flag.StringVar(&c.JWTSecret, "jwt-secret", os.Getenv("JWT_SECRET"), "with -url: the deployment's JWT_SECRET, to mint users' tokens")
	flag.StringVar(&c.RedisURL, "redis-url", "", "with -url: its Redis, to check the invariants")
	flag.StringVar(&c.MySQLDSN, "mysql-dsn", "", "with -url: its MySQL, to check the invariants")
	flag.IntVar(&c.APIs, "apis", 3, "local stack: api processes behind nginx")
	flag.IntVar(&c.Workers, "workers", 2, "local stack: worker processes")
	flag.IntVar(&c.Users, "users", 20000, "distinct users wrk rotates through")
	flag.IntVar(&c.Stock, "stock", 10000, "units on sale")
	flag.IntVar(&c.Limit, "limit", 2, "units per user")
	flag.DurationVar(&c.Duration, "duration", 0, "wrk run length (default 20s)")
	flag.IntVar(&c.Conns, "conns", 64, "wrk connections")
	flag.IntVar(&c.Threads, "threads", 2, "wrk threads")
	flag.IntVar(&c.ABRequests, "ab-requests", 5000, "ab: requests of one user's burst (0 skips ab)")
	flag.IntVar(&c.ABConns, "ab-conns", 50, "ab: concurrent requests")
	flag.Parse()
	c.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "loadtest: "+format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
