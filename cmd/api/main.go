// Command api serves the flashsale HTTP API: shoppers place orders, admins
// configure activities. See README.md for its configuration.
//
//	api                                   serve (applies pending migrations first)
//	api migrate up|down|status
//	api token --user 42 [--ttl 24h]       print a shopper's token
//	api token --users 1000 [--from 1]     print "user_id<TAB>token" lines (load tests)
//	api healthcheck [--url URL]           exit 0 if /healthz answers 200 within 2 s, else 1
//
// With neither REDIS_URL nor MYSQL_DSN set it runs in embedded mode: an
// in-memory Redis and SQL server, and a worker, inside the process.
package main

import (
	"fmt"
	"os"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/lifecycle"
)

func main() {
	if len(os.Args) > 1 {
		if err := command(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "api:", err)
			os.Exit(health.ExitCode(err))
		}
		return
	}
	lifecycle.Main("api", app.NewAPI())
}
