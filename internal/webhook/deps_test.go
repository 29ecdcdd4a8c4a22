package webhook

import (
	"os/exec"
	"strings"
	"testing"
)

// The package imports no storage or queue adapter, directly or through
// another package: the outbox, endpoints and log are MySQL's
// (internal/mysqlstore) and the tasks asynq's (internal/tasks), behind
// ports.go. (net/http it does use: sending webhooks over HTTP, signed and
// guarded, is what it is about, as Stripe's adapter is about Stripe.)
func TestWebhook_importsNoStorageOrQueueAdapter(t *testing.T) {
	adapters := []string{"github.com/redis/", "github.com/hibiken/asynq", "gorm.io/", "database/sql",
		"github.com/gin-gonic/", "github.com/flashsale/flashsale/internal/redisstore",
		"github.com/flashsale/flashsale/internal/mysqlstore", "github.com/flashsale/flashsale/internal/tasks"}
	out, err := exec.Command("go", "list", "-deps", "github.com/flashsale/flashsale/internal/webhook").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, a := range adapters {
			if strings.HasPrefix(dep, a) {
				t.Errorf("internal/webhook depends on %s", dep)
			}
		}
	}
}
