package testenv_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	_ "github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestRedisServer_killAndRestart_keepsAppendOnlyData(t *testing.T) {
	srv := testenv.StartRedisWith(t, testenv.RedisConfig{AppendOnly: true})
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("ping succeeded against a killed server")
	}

	srv.Restart()
	got, err := rdb.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("after restart: got %q, %v; want \"v\"", got, err)
	}
}

func TestRedisServer_pause_stallsUntilResume(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := srv.Client(t)

	srv.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	err := rdb.Ping(ctx).Err()
	cancel()
	var netErr net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
		t.Fatalf("ping to paused server: got %v, want a timeout", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("ping to paused server took %v despite a 200ms deadline", waited)
	}

	srv.Resume()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
}

func TestStartRedisN_startsIndependentServers(t *testing.T) {
	srvs := testenv.StartRedisN(t, 3)
	ctx := context.Background()
	for i, s := range srvs {
		if err := s.Client(t).Set(ctx, "who", i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range srvs {
		got, err := s.Client(t).Get(ctx, "who").Int()
		if err != nil || got != i {
			t.Fatalf("server %d holds %d, %v: servers share data", i, got, err)
		}
	}
}

func TestMySQL_givesEachTestItsOwnDatabase_droppedAfter(t *testing.T) {
	var first, firstName string
	t.Run("a", func(t *testing.T) {
		first = testenv.MySQL(t)
		firstName = dbName(t, first)
		db := open(t, first)
		if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	})
	second := testenv.MySQL(t)
	if second == first {
		t.Fatal("two tests got the same database")
	}
	db := open(t, second)
	var n int
	err := db.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", firstName).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database of the finished subtest still exists")
	}
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	return db
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	db := open(t, dsn)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}
