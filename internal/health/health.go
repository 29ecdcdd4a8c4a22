// Package health serves the liveness and readiness probes of both binaries.
package health

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

// Check reports whether one dependency is reachable.
type Check func(ctx context.Context) error

// NotReady is a check's failure whose text may be shown (it names no
// address or driver detail), e.g. "the database schema is not migrated yet".
// Any other failure shows as "unavailable" and its detail goes to the log:
// a driver's error names hosts and ports.
type NotReady string

func (n NotReady) Error() string { return string(n) }

// Timeout bounds all checks of one /readyz call.
const Timeout = 2 * time.Second

// Register adds GET /healthz (the process is up: always 200) and GET /readyz
// (every check passes: 200, else 503 UNAVAILABLE naming what failed, with
// Retry-After).
func Register(r gin.IRoutes, checks map[string]Check) {
	r.GET("/healthz", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"status": "ok"})
	})
	r.GET("/readyz", func(c *gin.Context) {
		results := run(c.Request.Context(), checks)
		var failed []string
		for name, res := range results {
			if res != "ok" {
				failed = append(failed, name)
			}
		}
		if len(failed) == 0 {
			c.JSON(http.StatusOK, gin.H{"status": "ready", "checks": results})
			return
		}
		sort.Strings(failed)
		// Like every 503 of the API (httperr.Write), with Retry-After: the
		// contract promises it, and a load balancer or client polling
		// readiness is told when to ask again.
		c.Header("Retry-After", httperr.RetryAfter)
		c.JSON(http.StatusServiceUnavailable, gin.H{
			"error":  gin.H{"code": httperr.Unavailable, "message": "not ready: " + joinFailures(failed, results)},
			"checks": results,
		})
	})
}

// run runs the checks concurrently; each result is "ok", a NotReady's text,
// or "unavailable" (the detail logged).
func run(ctx context.Context, checks map[string]Check) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[string]string, len(checks))
	for name, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := "ok"
			if err := check(ctx); err != nil {
				var nr NotReady
				if errors.As(err, &nr) {
					res = string(nr)
				} else {
					res = "unavailable"
					slog.WarnContext(ctx, "readiness check failed", "check", name, "err", err)
				}
			}
			mu.Lock()
			out[name] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func joinFailures(names []string, results map[string]string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += "; "
		}
		s += n + ": " + results[n]
	}
	return s
}
