package embedded_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/migrations"
)

// Servers mode runs a real redis-server and mariadbd: the migrations apply,
// the database takes rows, Redis answers; MariaDB runs with the throwaway
// settings (no fsync per commit); Close kills both and removes their files.
func TestStack_servers_realRedisAndMariaDB_goneAtClose(t *testing.T) {
	s, err := embedded.Start(slog.New(slog.NewTextHandler(io.Discard, nil)), embedded.Servers)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			s.Close()
		}
	})
	if s.Mode != embedded.Servers || s.MaxStock != 0 || !strings.Contains(s.Dir, "flashsale-embedded-") {
		t.Fatalf("stack: mode %s, max stock %d, dir %s", s.Mode, s.MaxStock, s.Dir)
	}
	ctx := context.Background()
	conns, err := connect.Open(s.RedisURL, connect.RedisMode{}, s.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	if info, err := conns.Redis.Info(ctx, "server").Result(); err != nil || !strings.Contains(info, "redis_version") {
		t.Fatalf("redis-server: %v", err)
	}
	sqlDB, _ := conns.DB.DB()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	var version, flush string
	if err := sqlDB.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_flush_log_at_trx_commit").Scan(&version, &flush); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") || flush != "0" {
		t.Fatalf("version %s, innodb_flush_log_at_trx_commit %s; want MariaDB with 0", version, flush)
	}

	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s after Close: %v", s.Dir, err)
	}
	if err := conns.Redis.Ping(ctx).Err(); err == nil {
		t.Fatal("redis-server still answers after Close")
	}
}
