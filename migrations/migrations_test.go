package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestUp_twoMigratorsAtOnce_applyEachMigrationOnce(t *testing.T) {
	dsn := testenv.MySQL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		db := open(t, dsn) // separate pools, as two processes would have
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = migrations.Up(ctx, db, nil) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db := open(t, dsn)
	var applied int
	if err := db.QueryRow("SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	v, err := migrations.Version(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.sql") // numbers may skip: count the files
	if applied != len(files) || v != migrations.Latest() {
		t.Fatalf("%d migrations recorded for %d files, version %d: one was applied twice, or not at all", applied, len(files), v)
	}
	if _, err := db.Exec("SELECT name, owner, fence, expires_at, meta FROM fs_locks"); err != nil {
		t.Fatalf("fs_locks after Up: %v", err)
	}
}

func TestDown_rollsBackTheLastMigration(t *testing.T) {
	db := open(t, testenv.MySQL(t))
	ctx := context.Background()
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	before, _ := migrations.Version(ctx, db)
	if err := migrations.Down(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	// The one before the last, whatever its number.
	var prev int64
	if err := db.QueryRow("SELECT MAX(version_id) FROM goose_db_version WHERE version_id < ? AND is_applied", before).Scan(&prev); err != nil {
		t.Fatal(err)
	}
	if after, _ := migrations.Version(ctx, db); after != prev || after >= before {
		t.Fatalf("version %d after Down from %d, want %d", after, before, prev)
	}
}

// Latest is the last migration's version, what Up brings a schema to.
func TestLatest_isWhatUpReaches(t *testing.T) {
	db := open(t, testenv.MySQL(t))
	ctx := context.Background()
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	v, err := migrations.Version(ctx, db)
	if err != nil || v != migrations.Latest() || v < 7 {
		t.Fatalf("after Up: version %d, %v; Latest() %d", v, err, migrations.Latest())
	}
}
