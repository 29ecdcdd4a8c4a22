// Package migrations holds the numbered SQL migrations (NNNNN_name.sql, up
// and down in one file) and applies them with pressly/goose, which records
// them in the goose_db_version table. A migration never changes after it
// has landed; a new one follows.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// provider builds a goose provider over db. Migrators serialise on goose's
// MySQL lock table (a row with a lease and a heartbeat), so two instances
// starting at once apply each migration once; a crashed migrator's lease
// runs out after 30s.
func provider(db *sql.DB, log *slog.Logger) (*goose.Provider, error) {
	locker, err := lock.NewMySQLTableLocker(lock.WithTableLockTimeout(200*time.Millisecond, 1500)) // up to 5 min
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithLocker(locker)}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	return goose.NewProvider(goose.DialectMySQL, db, files, opts...)
}

// Up applies every pending migration.
func Up(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	p, err := provider(db, log)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down rolls back the most recent migration.
func Down(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	p, err := provider(db, log)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Version returns the current schema version (0 before any migration).
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := provider(db, nil)
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	return p.GetDBVersion(ctx)
}

// Latest is the version the migrations bring a schema to: the last file's
// number (goose's naming, NNNNN_name.sql).
func Latest() int64 {
	names, _ := fs.Glob(files, "*.sql") // sorted; the pattern is valid
	var v int64
	for _, n := range names {
		if d, err := goose.NumericComponent(n); err == nil && d > v {
			v = d
		}
	}
	return v
}
