package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	gomysql "github.com/go-sql-driver/mysql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale/internal/lock"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

const envMySQLDSN = "LOCKTEST_MYSQL_DSN"

func openMigrated(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestMySQL_obtainRelease_fenceHolderAndNotObtained(t *testing.T) {
	db := openMigrated(t, testenv.MySQL(t))
	m := lock.NewMySQL(db, lock.Config{})
	ctx := context.Background()
	l, err := m.TryObtain(ctx, "k", 5*time.Second, lock.WithLabel("job"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second TryObtain: %v", err)
	}
	h, err := m.Holder(ctx, "k")
	if err != nil || h.Fence != l.Fence() || h.Label != "job" || h.PID != os.Getpid() || h.TTL < 4*time.Second {
		t.Fatalf("holder %+v, %v", h, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Holder(ctx, "k"); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("holder after release: %v", err)
	}
	l2, err := m.TryObtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Fatalf("fence %d after %d: deleting the row reset the fence", l2.Fence(), l.Fence())
	}
}

func TestMySQL_expiredRow_isTakenOver_andTheOldReleaseChangesNothing(t *testing.T) {
	db := openMigrated(t, testenv.MySQL(t))
	m := lock.NewMySQL(db, lock.Config{})
	ctx := context.Background()
	old, err := m.TryObtain(ctx, "k", 300*time.Millisecond, lock.WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, old.Lost(), 2*time.Second, "Lost of the unrenewed MySQL lock")
	time.Sleep(20 * time.Millisecond)
	taker, err := m.TryObtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatalf("takeover of an expired row: %v", err)
	}
	if taker.Fence() <= old.Fence() {
		t.Fatalf("fence %d after %d", taker.Fence(), old.Fence())
	}
	if err := old.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("the old holder's Release: %v", err)
	}
	if h, err := m.Holder(ctx, "k"); err != nil || h.Fence != taker.Fence() {
		t.Fatalf("the taker's row was changed: %+v, %v", h, err)
	}
}

func TestMySQL_renewal_keepsShortTTLLockFor1s(t *testing.T) {
	db := openMigrated(t, testenv.MySQL(t))
	m := lock.NewMySQL(db, lock.Config{})
	ctx := context.Background()
	l, err := m.TryObtain(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	assertOpen(t, l.Lost(), "Lost of a renewed MySQL lock")
	if _, err := m.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("renewed lock was taken: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Three processes of four goroutines contend on one MySQL lock.
func TestMySQL_threeProcesses_neverTwoHolders(t *testing.T) {
	if testenv.ChildRole() == "mysql-contender" {
		db, err := sql.Open("mysql", os.Getenv(envMySQLDSN))
		if err != nil {
			t.Fatal(err)
		}
		runMySQLContenders(t, lock.NewMySQL(db, lock.Config{}), openCritLog(t, os.Getenv(envLogPath)), os.Getenv(envUntil))
		return
	}
	dsn := testenv.MySQL(t)
	openMigrated(t, dsn)
	path := filepath.Join(t.TempDir(), "crit.log")
	until := time.Now().Add(3 * time.Second).Format(time.RFC3339Nano)
	var children []*testenv.Child
	for range 3 {
		children = append(children, testenv.StartChild(t, "TestMySQL_threeProcesses_neverTwoHolders", "mysql-contender",
			envMySQLDSN+"="+dsn, envLogPath+"="+path, envUntil+"="+until))
	}
	for i, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, c.Output())
		}
	}
	if per := checkCritLog(t, path); len(per) != 3 {
		t.Fatalf("holds per process %v: want all 3 to have held it", per)
	}
}

func runMySQLContenders(t *testing.T, m *lock.MySQL, log *critLog, untilStr string) {
	until, err := time.Parse(time.RFC3339Nano, untilStr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("pid%d/%d", os.Getpid(), g)
			for time.Now().Before(until) {
				l, err := m.Obtain(ctx, "k", 2*time.Second)
				if err != nil {
					t.Errorf("%s: %v", who, err)
					return
				}
				log.write("E", l.Fence(), who)
				time.Sleep(time.Millisecond)
				log.write("X", l.Fence(), who)
				if err := l.Release(ctx); err != nil {
					t.Errorf("%s: release: %v", who, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// With CLIENT_FOUND_ROWS (clientFoundRows=true), an upsert that leaves a
// held row unchanged reports 1 row: obtainTx takes it for an insert.
func TestMySQL_clientFoundRowsDSN_stillOneHolder(t *testing.T) {
	dsn := testenv.MySQL(t)
	openMigrated(t, dsn)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := lock.NewMySQL(db, lock.Config{})
	ctx := context.Background()
	a, err := m.TryObtain(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := m.TryObtain(ctx, "k", 5*time.Second); err == nil {
		t.Errorf("two holders: fences %d and %d", a.Fence(), b.Fence())
	}
}
