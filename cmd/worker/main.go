// Command worker runs flashsale's background jobs on asynq: it records
// accepted orders in MySQL, cancels unpaid orders and returns their stock,
// and reconciles Redis with MySQL. See docs/config.md for its configuration.
//
//	worker                                run (until SIGINT or SIGTERM)
//	worker healthcheck [--url URL]        exit 0 if /healthz answers 200 within 2 s, else 1
package main

import (
	"fmt"
	"os"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/lifecycle"
)

const usage = `usage:
  worker                             run the worker
  worker healthcheck [--url URL]     GET /healthz on WORKER_HTTP_ADDR (or URL) within 2 s: exit 0
                                     on 200, else 1 (the container health check; no curl needed)`

func main() {
	if len(os.Args) > 1 {
		if err := command(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(health.ExitCode(err))
		}
		return
	}
	lifecycle.Main("worker", app.NewWorker())
}

// command runs a subcommand.
func command(args []string) error {
	switch args[0] {
	case "healthcheck":
		return healthcheck(args[1:])
	case "help", "-h", "--help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
