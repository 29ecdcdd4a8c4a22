package embedded_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// indexedTable creates a table of n rows on the in-memory server, row i
// numbered "n<i>" (a unique key) with a = i (a secondary key).
func indexedTable(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE o (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, no VARCHAR(20) NOT NULL, " +
		"a BIGINT NOT NULL, f BIGINT NOT NULL, UNIQUE KEY uno (no), KEY ka (a))"); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i := range n {
		rows = append(rows, fmt.Sprintf("('n%02d', %d, 1)", i, i))
	}
	if _, err := db.Exec("INSERT INTO o (no, a, f) VALUES " + strings.Join(rows, ",")); err != nil {
		t.Fatal(err)
	}
}

// moveRows updates rows of o in q's transaction: each update deletes its
// row and appends it, and the statement sorts the rows again, which
// renumbers the index entries of the rows after it.
func moveRows(t *testing.T, q interface {
	Exec(string, ...any) (sql.Result, error)
}) {
	t.Helper()
	if _, err := q.Exec("INSERT INTO o (no, a, f) VALUES ('n03', 3, 2), ('n11', 11, 2), ('n20', 20, 2) " +
		"ON DUPLICATE KEY UPDATE f = GREATEST(f, VALUES(f))"); err != nil {
		t.Fatal(err)
	}
}

// indexesRight fails the test unless every row of o is found by each of
// its keys, and by no other value, with f as want says.
func indexesRight(t *testing.T, db *sql.DB, n int, want func(i int) int) {
	t.Helper()
	var wrong []string
	for i := range n {
		var no string
		var f int
		if err := db.QueryRow("SELECT no, f FROM o WHERE a = ?", i).Scan(&no, &f); err != nil || no != fmt.Sprintf("n%02d", i) || f != want(i) {
			wrong = append(wrong, fmt.Sprintf("a=%d: %s f=%d (%v)", i, no, f, err))
		}
		var a int
		if err := db.QueryRow("SELECT a FROM o WHERE no = ?", fmt.Sprintf("n%02d", i)).Scan(&a); err != nil || a != i {
			wrong = append(wrong, fmt.Sprintf("no=n%02d: a=%d (%v)", i, a, err))
		}
	}
	var rows, byKey int
	_ = db.QueryRow("SELECT COUNT(*) FROM o").Scan(&rows)
	_ = db.QueryRow("SELECT COUNT(*) FROM o WHERE a >= 0").Scan(&byKey)
	if len(wrong) > 0 || rows != n || byKey != n {
		t.Fatalf("%d rows, %d by the key a; lookups wrong: %v", rows, byKey, wrong)
	}
}

// A transaction that moved rows and then rolled back (by ROLLBACK, or by
// its connection's end) leaves every index finding its rows, and the
// rows as they were; the next row gets the next id. (go-mysql-server
// left the index entries renumbered for rows the rollback put back: an
// embedded sale found an order twice and another never.)
func TestStack_memory_rolledBackUpdates_leaveIndexesRight(t *testing.T) {
	for _, end := range []string{"rollback", "connection closed"} {
		t.Run(end, func(t *testing.T) {
			s, db := startSQL(t)
			const n = 30
			indexedTable(t, db, n)
			ctx, cancel := context.WithCancel(context.Background())
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			moveRows(t, tx)
			if end == "rollback" {
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			} else {
				cancel() // the driver closes the connection
				deadline := time.Now().Add(10 * time.Second)
				for s.RepairedTables() == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			cancel()
			if got := s.RepairedTables(); got != 1 {
				t.Fatalf("%d tables rebuilt, want o's", got)
			}
			indexesRight(t, db, n, func(int) int { return 1 })
			res, err := db.Exec("INSERT INTO o (no, a, f) VALUES ('n99', 99, 1)")
			if err != nil {
				t.Fatal(err)
			}
			if id, _ := res.LastInsertId(); id != n+1 {
				t.Fatalf("the next row's id %d, want %d", id, n+1)
			}
		})
	}
}

// A read beside an open transaction that moved rows waits for its end,
// and finds through the indexes the rows the commit left; a committed
// transaction needs no repair.
func TestStack_memory_readsBesideAnOpenTransaction_findTheirRows(t *testing.T) {
	s, db := startSQL(t)
	const n = 30
	indexedTable(t, db, n)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	moveRows(t, tx)
	read := make(chan string, 1)
	go func() {
		var no string
		err := db.QueryRow("SELECT no FROM o WHERE a = 25").Scan(&no)
		read <- fmt.Sprint(no, err)
	}()
	select {
	case got := <-read:
		t.Fatalf("a read beside the open transaction answered %s before its commit", got)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := <-read; got != "n25<nil>" {
		t.Fatalf("the read found %s, want n25", got)
	}
	indexesRight(t, db, n, func(i int) int {
		if i == 3 || i == 11 || i == 20 {
			return 2
		}
		return 1
	})
	if got := s.RepairedTables(); got != 0 {
		t.Fatalf("%d tables rebuilt after a commit, want none", got)
	}
}

// Random batches of new rows and updates, each in a transaction that
// commits or rolls back (a third of them) or in none, leave every row
// found through its indexes as a scan finds it, and the rolled-back ones'
// rows as they were.
func TestStack_memory_randomTransactions_indexesFindTheirRows(t *testing.T) {
	_, db := startSQL(t)
	if _, err := db.Exec("CREATE TABLE o (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, no VARCHAR(20) NOT NULL, " +
		"u BIGINT NOT NULL, st VARCHAR(10) NOT NULL, f BIGINT NOT NULL, UNIQUE KEY uno (no), KEY ku (u, id), KEY kst (st, f))"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 30))
	want := map[int]int{} // row k's f, as committed
	next := 0
	read := func(q string) string {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var no string
			var f int
			if err := rows.Scan(&no, &f); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s:%d", no, f))
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	for op := range 200 {
		batch := map[int]int{}
		var vals []string
		for range 1 + rng.IntN(6) {
			k := next
			if next > 0 && rng.IntN(3) == 0 {
				k = rng.IntN(next) // an update: the row moves
			} else {
				next++
			}
			if _, twice := batch[k]; twice {
				continue // one statement writes a row once (mysqlstore's latestOnce)
			}
			batch[k] = want[k] + 1 + rng.IntN(2)
			vals = append(vals, fmt.Sprintf("('n%04d', %d, 'p', %d)", k, k, batch[k]))
		}
		q := "INSERT INTO o (no, u, st, f) VALUES " + strings.Join(vals, ",") + " ON DUPLICATE KEY UPDATE f = VALUES(f)"
		commit := true
		switch rng.IntN(3) {
		case 0:
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		default:
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(q); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				err, commit = tx.Rollback(), false
			} else {
				err = tx.Commit()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			maps.Copy(want, batch)
		}
		scan := read("SELECT no, f FROM o")
		for _, q := range []string{"SELECT no, f FROM o WHERE u >= 0", "SELECT no, f FROM o WHERE st = 'p'"} {
			if got := read(q); got != scan {
				t.Fatalf("op %d (committed %v): %s found\n%s\nwhere a scan found\n%s", op, commit, q, got, scan)
			}
		}
		var wantRows []string
		for k, f := range want {
			wantRows = append(wantRows, fmt.Sprintf("n%04d:%d", k, f))
		}
		slices.Sort(wantRows)
		if scan != strings.Join(wantRows, ",") {
			t.Fatalf("op %d (committed %v): rows\n%s\nwant\n%s", op, commit, scan, strings.Join(wantRows, ","))
		}
	}
}
