package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/internal/health"
)

// Each check is a series of flashsale_dependency_up, 1 when it answered
// and 0 when it failed or did not answer within a second.
func TestCollector_upWhenTheCheckAnswers(t *testing.T) {
	c := health.Collector(map[string]health.Check{
		"redis": func(context.Context) error { return nil },
		"mysql": func(context.Context) error { return errors.New("connection refused") },
		"slow": func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
				return nil
			}
		},
	})
	start := time.Now()
	err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP flashsale_dependency_up 1 if the dependency answered its readiness check (the one /readyz runs) within a second at the scrape, else 0.
# TYPE flashsale_dependency_up gauge
flashsale_dependency_up{dependency="mysql"} 0
flashsale_dependency_up{dependency="redis"} 1
flashsale_dependency_up{dependency="slow"} 0
`))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the scrape took %v: a check that does not answer must not hold it", took)
	}
}
