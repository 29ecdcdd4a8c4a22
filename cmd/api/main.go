// Command api serves the flashsale HTTP API: shoppers place orders, admins
// configure activities. See README.md for its configuration.
//
// With neither REDIS_URL nor MYSQL_DSN set it runs in embedded mode: an
// in-memory Redis and SQL server inside the process, for trying it out.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/lifecycle"
	"github.com/flashsale/flashsale/internal/logging"
)

func main() { lifecycle.Main("api", NewMain()) }

// Main is the api program: Run wires and starts it, Close stops it.
type Main struct {
	Config config.Config
	Logger *slog.Logger

	embedded *embedded.Stack
	conns    *connect.Conns
	http     *httpapi.Server
}

// Log is the program's logger.
func (m *Main) Log() *slog.Logger { return m.Logger }

// NewMain returns a Main that reads its configuration from the environment.
func NewMain() *Main {
	return &Main{Logger: slog.Default()}
}

// Run loads the configuration, connects, and starts serving. It returns once
// the server is listening.
func (m *Main) Run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	m.Config = cfg
	m.Logger = logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(m.Logger)

	switch {
	case cfg.RedisURL == "" && cfg.MySQLDSN == "":
		if m.embedded, err = embedded.Start(m.Logger); err != nil {
			return err
		}
		cfg.RedisURL, cfg.MySQLDSN = m.embedded.RedisURL, m.embedded.MySQLDSN
		m.Logger.Warn("EMBEDDED MODE: REDIS_URL and MYSQL_DSN are not set, so Redis and MySQL run " +
			"in memory inside this process. Every activity and order is lost when it exits.")
	case cfg.RedisURL == "" || cfg.MySQLDSN == "":
		return errors.New("set both REDIS_URL and MYSQL_DSN, or neither for the embedded in-memory mode")
	}
	if m.conns, err = connect.Open(cfg.RedisURL, cfg.MySQLDSN); err != nil {
		return err
	}

	router := httpapi.NewRouter(httpapi.Deps{Logger: m.Logger, Checks: m.conns.Checks()})
	if m.http, err = httpapi.Listen(cfg.HTTPAddr, router, m.Logger); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	m.Logger.Info("api listening", "addr", m.http.Addr())
	return nil
}

// Close stops accepting requests, waits for those in flight up to the
// shutdown timeout, and closes the connections.
func (m *Main) Close() error {
	var errs []error
	if m.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.Config.ShutdownTimeout)
		errs = append(errs, m.http.Shutdown(ctx))
		cancel()
	}
	if m.conns != nil {
		errs = append(errs, m.conns.Close())
	}
	if m.embedded != nil {
		errs = append(errs, m.embedded.Close())
	}
	return errors.Join(errs...)
}
