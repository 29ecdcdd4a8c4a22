// Command worker runs flashsale's background jobs on asynq: it persists
// accepted orders into MySQL, cancels unpaid orders and settles group buys.
// See README.md for its configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/lifecycle"
	"github.com/flashsale/flashsale/internal/logging"
)

func main() { lifecycle.Main("worker", NewMain()) }

// Main is the worker program: Run wires and starts it, Close stops it.
type Main struct {
	Config config.Config
	Logger *slog.Logger

	conns *connect.Conns
	tasks *asynq.Server
	http  *httpapi.Server
}

// Log is the program's logger.
func (m *Main) Log() *slog.Logger { return m.Logger }

// NewMain returns a Main that reads its configuration from the environment.
func NewMain() *Main {
	return &Main{Logger: slog.Default()}
}

// Run loads the configuration, connects, and starts the task server and the
// operational HTTP endpoints.
func (m *Main) Run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	m.Config = cfg
	m.Logger = logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(m.Logger)

	if cfg.RedisURL == "" || cfg.MySQLDSN == "" {
		return errors.New("set REDIS_URL and MYSQL_DSN (the embedded in-memory mode is the api's, with no variables set)")
	}
	if m.conns, err = connect.Open(cfg.RedisURL, cfg.MySQLDSN); err != nil {
		return err
	}

	m.tasks = asynq.NewServerFromRedisClient(m.conns.Redis, asynq.Config{
		Logger:          logging.Asynq{Log: m.Logger},
		ShutdownTimeout: cfg.ShutdownTimeout,
	})
	mux := asynq.NewServeMux()
	if err := m.tasks.Start(mux); err != nil {
		return fmt.Errorf("start task server: %w", err)
	}

	router := httpapi.NewOpsRouter(m.Logger, m.conns.Checks())
	if m.http, err = httpapi.Listen(cfg.WorkerHTTPAddr, router, m.Logger); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.WorkerHTTPAddr, err)
	}
	m.Logger.Info("worker running", "addr", m.http.Addr())
	return nil
}

// Close stops taking tasks, lets running ones finish up to the shutdown
// timeout, and closes the connections.
func (m *Main) Close() error {
	var errs []error
	if m.tasks != nil {
		m.tasks.Shutdown()
	}
	if m.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
		errs = append(errs, m.http.Shutdown(ctx))
		cancel()
	}
	if m.conns != nil {
		errs = append(errs, m.conns.Close())
	}
	return errors.Join(errs...)
}
