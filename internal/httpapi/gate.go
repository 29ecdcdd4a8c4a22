package httpapi

import (
	"context"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/httperr"
)

// Gate holds a group of routes at 503 UNAVAILABLE until it is opened, e.g.
// while the schema is being migrated. A nil Gate is always open.
type Gate struct {
	reason string
	open   atomic.Bool
}

// NewGate returns a closed gate that explains itself with reason.
func NewGate(reason string) *Gate { return &Gate{reason: reason} }

// Open lets requests through from now on.
func (g *Gate) Open() { g.open.Store(true) }

// Check is a readiness check: an error while the gate is closed.
func (g *Gate) Check(context.Context) error {
	if g.open.Load() {
		return nil
	}
	return health.NotReady(g.reason)
}

func (g *Gate) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		if g != nil && !g.open.Load() {
			httperr.Write(c, httperr.New(httperr.Unavailable, "%s", g.reason))
			return
		}
		c.Next()
	}
}
