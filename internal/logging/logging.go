// Package logging builds the service's slog logger and adapts it for the
// libraries that bring their own logging interfaces (gin, asynq).
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
)

// New returns a logger writing text or json lines at level to w.
func New(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Requests logs one line per request at debug level, and at warn for 5xx
// answers. Request logging at info would cost more than the order path
// itself under a flash-sale load.
func Requests(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelWarn
		}
		if !log.Enabled(c.Request.Context(), level) {
			return
		}
		log.Log(c.Request.Context(), level, "request",
			"method", c.Request.Method, "path", c.Request.URL.Path, "status", status,
			"duration", time.Since(start), "client", c.ClientIP())
	}
}

// Asynq adapts log for asynq.Config.Logger.
type Asynq struct{ Log *slog.Logger }

func (a Asynq) Debug(args ...any) { a.Log.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a Asynq) Info(args ...any)  { a.Log.Info(fmt.Sprint(args...), "component", "asynq") }
func (a Asynq) Warn(args ...any)  { a.Log.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a Asynq) Error(args ...any) { a.Log.Error(fmt.Sprint(args...), "component", "asynq") }
func (a Asynq) Fatal(args ...any) {
	a.Log.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
}
