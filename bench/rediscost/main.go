// Command rediscost measures what one accepted order costs Redis's main
// thread, phase by phase (`make bench-rediscost`; docs/benchmarks.md): the
// flags of bench/internal/rediscost.Run, and its table on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flashsale/flashsale/bench/internal/rediscost"
)

func main() {
	var o rediscost.Options
	flag.IntVar(&o.Orders, "orders", 50_000, "orders per phase")
	flag.IntVar(&o.Conc, "conc", 16, "goroutines calling each phase at once")
	flag.BoolVar(&o.NoRateLimit, "no-rate-limit", false, "place the orders without the per-user rate limit (to see the limit's share)")
	flag.BoolVar(&o.HoldUserLock, "hold-user-lock", false, "take the user lock for every order (ORDER_USER_LOCK_HOLD), not elided when free")
	flag.BoolVar(&o.ByCommand, "by-command", false, "also list each phase's commands (INFO commandstats): calls and Redis µs per order")
	flag.IntVar(&o.Refused, "refused", 0, "also measure this many orders refused by the rate limit (one user, 1 a second), apart from the total")
	flag.IntVar(&o.Items, "items", 0, "also measure the accept at a sale of this many items (each order naming the next), beside the sale of one item, apart from the total")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	phases, err := rediscost.Run(ctx, o, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "rediscost: "+format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
	rediscost.Print(os.Stdout, o, phases)
}
