// Command api serves the flashsale HTTP API: shoppers place orders, admins
// configure activities. See docs/config.md for its configuration.
//
//	api                                   serve (applies pending migrations first)
//	api migrate up|down|status
//	api token --user 42 [--ttl 24h]       print a shopper's token
//	api token --users 1000 [--from 1]     print "user_id<TAB>token" lines (load tests)
//	api healthcheck [--url URL]           exit 0 if /healthz answers 200 within 2 s, else 1
//	api scripts [NAME ...]                print the Lua scripts loaded into Redis
//	api webhook --order NO                send a signed payment_intent.succeeded (local trials)
//
// With neither REDIS_URL nor MYSQL_DSN set it runs in embedded mode: its
// own Redis and MySQL (redis-server and mariadbd as child processes when
// installed, else in memory: EMBEDDED_MODE), and a worker inside the
// process.
package main

import (
	"fmt"
	"os"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/lifecycle"
)

func main() {
	if len(os.Args) > 1 {
		if err := command(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "api:", err)
			os.Exit(exitCode(err))
		}
		return
	}
	lifecycle.Main("api", app.NewAPI())
}
