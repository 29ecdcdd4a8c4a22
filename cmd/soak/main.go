// Command soak is the fault soak (`make soak`): on a stack of real
// processes — a Redis primary, a replica and three sentinels, mariadbd, 2
// api processes behind nginx, 2 workers — a crowd of shoppers buys from two
// flash sales and two group buys at once for -duration while faults strike
// at random (an api or a worker killed with -9 and restarted, Redis paused,
// MariaDB stopped and started, the Redis primary killed -9 and failed
// over); the invariants are checked every few seconds and, once everything
// has settled, in full. It prints its seed first and every fault as it
// happens, then a report, and exits 1 when an invariant broke (2 when the
// soak itself could not run).
//
//	go run ./cmd/soak                                  # an hour, a fault every 20 s on average
//	go run ./cmd/soak -duration 3m -fault-every 10s
//	go run ./cmd/soak -seed 123456789 -duration 3m     # replay a run's faults and choices
//	go run ./cmd/soak -sentinel=false                  # one redis-server, no failovers
//	go run ./cmd/soak -network                         # the network's faults too (toxiproxy)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/internal/soak"
)

func main() {
	var o soak.Options
	flag.DurationVar(&o.Duration, "duration", time.Hour, "how long the shoppers shop")
	flag.DurationVar(&o.FaultEvery, "fault-every", 20*time.Second, "mean time between faults (each gap drawn from ½ to 1½ of it)")
	flag.Int64Var(&o.Seed, "seed", 0, "seed of every random choice (0: pick one and print it)")
	flag.IntVar(&o.Clients, "clients", 24, "shoppers at once")
	flag.DurationVar(&o.SettleTimeout, "settle-timeout", 5*time.Minute, "how long to wait, after the load, for everything to settle")
	sentinel := flag.Bool("sentinel", true, "Redis as a primary, a replica and three sentinels with REDIS_ACK_REPLICAS=1, and Redis failovers among the faults (false: one redis-server, no failovers)")
	flag.BoolVar(&o.Network, "network", false, "every process a host whose links go through toxiproxy, and the network's faults among the faults (partitions, split brain, latency, resets, replies cut in half); needs root")
	only := flag.String("only", "", "comma-separated fault kinds to draw from alone (e.g. \"split brain\")")
	flag.Parse()
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	o.SingleRedis = !*sentinel
	o.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "soak: "+format+"\n", args...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := soak.Run(ctx, o)
	if rep != nil {
		fmt.Print(rep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
