package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

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

// 00016 moves the outbox from a mark on each event to the dispatcher's
// cursor: the cursor starts below the oldest event not yet dispatched (the
// ones above it marked out of order are dispatched again: at least once),
// dated long ago (no repair takes them for recent); its Down marks again
// every event up to the cursor.
func TestMigration00016_cursorStartsBelowTheOldestUndispatched(t *testing.T) {
	db := open(t, testenv.MySQL(t))
	ctx := context.Background()
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := migrations.Version(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if v == 15 {
			break
		}
		if err := migrations.Down(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range []int{1, 1, 0, 1, 0} { // seq 1..5
		if _, err := db.Exec("INSERT INTO webhook_events (id, type, subject, sequence, activity_id, occurred_at, body, dispatched, created_at) "+
			"VALUES (?, 'order.accepted', ?, 1, 42, UTC_TIMESTAMP(3), '{}', ?, UTC_TIMESTAMP(6))", fmt.Sprintf("evt_%d", i+1), fmt.Sprintf("42-%d", i+1), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	var cursor int64
	var at time.Time
	if err := db.QueryRow("SELECT through_seq, dispatched_at FROM webhook_dispatches ORDER BY through_seq DESC LIMIT 1").Scan(&cursor, &at); err != nil {
		t.Fatal(err)
	}
	if cursor != 2 || at.Year() != 1970 {
		t.Fatalf("cursor %d dated %v; want 2 (below seq 3, the oldest undispatched), long ago", cursor, at)
	}
	if _, err := db.Exec("SELECT dispatched FROM webhook_events"); err == nil {
		t.Fatal("the dispatched column is still there")
	}
	for {
		v, _ := migrations.Version(ctx, db)
		if v == 15 {
			break
		}
		if err := migrations.Down(ctx, db, nil); err != nil {
			t.Fatal(err)
		}
	}
	var marked string
	if err := db.QueryRow("SELECT GROUP_CONCAT(dispatched ORDER BY seq SEPARATOR '') FROM webhook_events").Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked != "11000" {
		t.Fatalf("after Down the marks are %s, want 11000 (up to the cursor)", marked)
	}
}
