package main

import (
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/health"
)

// healthcheck is `worker healthcheck [--url URL]`: GET /healthz on
// WORKER_HTTP_ADDR (health.Command).
func healthcheck(args []string) error {
	return health.Command(args, "WORKER_HTTP_ADDR", usage, func() (string, error) {
		cfg, err := config.Load()
		return cfg.WorkerHTTPAddr, err
	})
}
