package order

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain packages import no adapter: no Redis, asynq, SQL or HTTP
// library, directly or through another package. The adapters depend on
// them, never the reverse (docs/orders.md).
func TestDomain_importsNoAdapter(t *testing.T) {
	domain := []string{"order", "activity", "catalog", "admin", "refusal"}
	adapters := []string{"github.com/redis/", "github.com/hibiken/asynq", "gorm.io/", "database/sql",
		"github.com/gin-gonic/", "net/http", "github.com/flashsale/flashsale/internal/redisstore",
		"github.com/flashsale/flashsale/internal/mysqlstore", "github.com/flashsale/flashsale/internal/tasks"}
	for _, pkg := range domain {
		out, err := exec.Command("go", "list", "-deps", "github.com/flashsale/flashsale/internal/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, a := range adapters {
				if strings.HasPrefix(dep, a) {
					t.Errorf("internal/%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
