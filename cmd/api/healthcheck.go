package main

import (
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/health"
)

// healthcheck is `api healthcheck [--url URL]`: GET /healthz on HTTP_ADDR
// (health.Command).
func healthcheck(args []string) error {
	return health.Command(args, "HTTP_ADDR", usage, func() (string, error) {
		cfg, err := config.Load()
		return cfg.HTTPAddr, err
	})
}
