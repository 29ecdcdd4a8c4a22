package embedded_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/lock"

	_ "github.com/go-sql-driver/mysql"
)

// start runs a Memory mode stack (Servers mode has servers_test.go).
func start(t *testing.T) *embedded.Stack {
	t.Helper()
	s, err := embedded.Start(slog.New(slog.NewTextHandler(io.Discard, nil)), embedded.Memory)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startSQL is start, with a database/sql handle on its SQL server.
func startSQL(t *testing.T) (*embedded.Stack, *sql.DB) {
	t.Helper()
	s := start(t)
	db, err := sql.Open("mysql", s.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}

// Embedded mode runs the real lock scripts on miniredis: they must behave as
// on redis-server, and ttls must run out in real time.
func TestStack_lockWorksOnEmbeddedRedis(t *testing.T) {
	s := start(t)
	rdb, err := connect.Redis(s.RedisURL, connect.RedisMode{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	holder, waiter := lock.New(rdb), lock.New(rdb)
	defer holder.Close()
	defer waiter.Close()
	ctx := context.Background()

	l, err := holder.TryObtain(ctx, "k", 30*time.Second, lock.WithLabel("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := holder.Holder(ctx, "k"); err != nil || h.Label != "demo" || h.Fence != l.Fence() {
		t.Fatalf("holder %+v, %v", h, err)
	}
	if _, err := waiter.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second obtain: %v", err)
	}
	got := make(chan *lock.Lock)
	go func() {
		w, err := waiter.Obtain(ctx, "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-got:
		if w == nil || w.Fence() <= l.Fence() {
			t.Fatalf("waiter fence not above %d", l.Fence())
		}
		w.Release(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken on miniredis")
	}

	short, err := holder.TryObtain(ctx, "ttl", 200*time.Millisecond, lock.WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	<-short.Lost()
	time.Sleep(150 * time.Millisecond)
	if _, err := waiter.TryObtain(ctx, "ttl", time.Second); err != nil {
		t.Fatalf("ttl did not run out in real time: %v", err)
	}
}

func TestStack_gormTalksToEmbeddedSQL(t *testing.T) {
	s := start(t)
	db, err := connect.MySQL(s.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := connect.PingMySQL(db)(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE t (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10) NOT NULL, UNIQUE KEY uv (v))").Error; err != nil {
		t.Fatal(err)
	}
	res := db.Exec("INSERT IGNORE INTO t (v) VALUES ('a'), ('a'), ('b')")
	if res.Error != nil || res.RowsAffected != 2 {
		t.Fatalf("INSERT IGNORE: %v rows %d, want 2", res.Error, res.RowsAffected)
	}
}
