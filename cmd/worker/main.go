// Command worker runs flashsale's background jobs on asynq: it records
// accepted orders in MySQL, cancels unpaid orders and returns their stock,
// and reconciles Redis with MySQL. See README.md for its configuration.
package main

import (
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/lifecycle"
)

func main() { lifecycle.Main("worker", app.NewWorker()) }
