// Command api serves the flashsale HTTP API: shoppers place orders, admins
// configure activities. See README.md for its configuration.
//
//	api                     serve (applies pending migrations first)
//	api migrate up|down|status
//
// With neither REDIS_URL nor MYSQL_DSN set it runs in embedded mode: an
// in-memory Redis and SQL server inside the process, for trying it out.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/lifecycle"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/migrations"
)

func main() {
	if len(os.Args) > 1 {
		if err := command(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "api:", err)
			os.Exit(2)
		}
		return
	}
	lifecycle.Main("api", NewMain())
}

// Main is the api program: Run wires and starts it, Close stops it.
type Main struct {
	Config config.Config
	Logger *slog.Logger

	embedded *embedded.Stack
	conns    *connect.Conns
	http     *httpapi.Server
	stop     context.CancelFunc // ends background work
}

// Log is the program's logger.
func (m *Main) Log() *slog.Logger { return m.Logger }

// NewMain returns a Main that reads its configuration from the environment.
func NewMain() *Main {
	return &Main{Logger: slog.Default()}
}

// Run loads the configuration, connects, migrates, and starts serving. It
// returns once the server is listening.
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
		if cfg.AdminToken == "" {
			cfg.AdminToken = randomToken()
		}
		m.Logger.Warn("EMBEDDED MODE: REDIS_URL and MYSQL_DSN are not set, so Redis and MySQL run " +
			"in memory inside this process. Every activity and order is lost when it exits.")
		m.Logger.Info("embedded mode admin token", "ADMIN_TOKEN", cfg.AdminToken)
	case cfg.RedisURL == "" || cfg.MySQLDSN == "":
		return errors.New("set both REDIS_URL and MYSQL_DSN, or neither for the embedded in-memory mode")
	}
	if cfg.AdminToken == "" {
		m.Logger.Warn("ADMIN_TOKEN is not set: the admin API refuses every request")
	}
	if m.conns, err = connect.Open(cfg.RedisURL, cfg.MySQLDSN); err != nil {
		return err
	}
	bg, stop := context.WithCancel(context.Background())
	m.stop = stop
	checks := m.conns.Checks()
	schema := httpapi.NewGate("the database schema is not migrated yet")
	checks["migrations"] = schema.Check
	if cfg.MigrateOnStart || m.embedded != nil {
		// MySQL being down at start must not keep the API from taking orders
		// (they only need Redis): migrate in the background, retrying; until
		// then the admin API answers UNAVAILABLE and /readyz says why.
		sqlDB, err := m.conns.DB.DB()
		if err != nil {
			return err
		}
		go migrateUntilDone(bg, sqlDB, m.Logger, schema)
	} else {
		schema.Open()
	}

	stocks := stock.New(m.conns.Redis, stock.Config{})
	go stocks.WatchRestock(bg, m.Logger)

	router := httpapi.NewRouter(httpapi.Deps{
		Logger:     m.Logger,
		Checks:     checks,
		Admin:      admin.New(mysqlstore.NewActivities(m.conns.DB), stocks, nil),
		AdminToken: cfg.AdminToken,
		AdminGate:  schema,
	})
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
	if m.stop != nil {
		m.stop()
	}
	if m.conns != nil {
		errs = append(errs, m.conns.Close())
	}
	if m.embedded != nil {
		errs = append(errs, m.embedded.Close())
	}
	return errors.Join(errs...)
}

// migrateUntilDone applies pending migrations, retrying with backoff while
// MySQL cannot be reached, and opens gate when done.
func migrateUntilDone(ctx context.Context, db *sql.DB, log *slog.Logger, gate *httpapi.Gate) {
	backoff := 500 * time.Millisecond
	for {
		err := migrations.Up(ctx, db, log)
		if err == nil {
			gate.Open()
			return
		}
		log.Error("migrations failed; retrying", "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
