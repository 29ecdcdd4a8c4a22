package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/webhook"
	"github.com/flashsale/flashsale/migrations"
)

// A batch of any size is cut into power-of-two chunks, largest first, that
// add up to it: as many as n has bits set (and one more of the largest for
// each 2^maxK above it), each a statement the multiRow holds.
func TestMultiRow_chunks_addUpToTheBatch(t *testing.T) {
	orders := newMultiRow("INSERT INTO t VALUES ", "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", "")
	if orders.maxK != 9 || eventsInsert.maxK != 9 { // 512 rows of 16 placeholders, 512 of 9
		t.Fatalf("the largest chunks: 2^%d rows of 16, 2^%d events", orders.maxK, eventsInsert.maxK)
	}
	for _, m := range []*multiRow{orders, eventsInsert} {
		for n := 1; n <= 5000; n++ {
			left, prev, count := n, 1<<30, 0
			for left > 0 {
				rows, k := m.chunk(left)
				if rows != 1<<k || rows > left || rows > prev || m.texts[k] == "" {
					t.Fatalf("n=%d: chunk %d (2^%d) of %d left after %d", n, rows, k, left, prev)
				}
				left, prev, count = left-rows, rows, count+1
			}
			if want := bits.OnesCount(uint(n&(1<<m.maxK-1))) + n>>m.maxK; count != want {
				t.Fatalf("n=%d: %d statements, want %d", n, count, want)
			}
		}
	}
}

// The worker's write of 331 paid orders sends their order.paid events as
// prepared statements (chunks of 256, 64, 8, 2 and 1; their order.accepted
// is their row, migrations/00018), and every order and its event is
// there, as written. The same rows through gorm's own
// prepared-statement mode (a transaction that is not database/sql's) go as
// one text statement, and are there too.
func TestMultiRow_writesEveryRow_prepared_orAsText(t *testing.T) {
	db := migratedDB(t)
	sqlDB, _ := db.DB()
	ctx := context.Background()
	const n = 331
	orders := func(activity int64) []order.Order {
		os := make([]order.Order, n)
		for i := range os {
			os[i] = order.Order{No: order.NewNo(activity), ActivityID: activity, UserID: int64(1000 + i), Quantity: 1 + i%3,
				PriceCents: 250, AmountCents: int64(250 * (1 + i%3)), Status: order.Paid, Fence: 2,
				CreatedAt: time.Now().Truncate(time.Millisecond), PaidAt: time.Now().Truncate(time.Millisecond),
				PaymentID: fmt.Sprintf("pi_%d", i), Item: "SKU-" + string(rune('A'+i%3))}
		}
		return os
	}
	check := func(activity int64, os []order.Order) {
		t.Helper()
		var rows, events int64
		db.Model(&OrderRow{}).Where("activity_id = ? AND event_seq IS NOT NULL", activity).Count(&rows)
		db.Model(&EventRow{}).Where("activity_id = ? AND type = ?", activity, string(webhook.OrderPaid)).Count(&events)
		if rows != n || events != n {
			t.Fatalf("activity %d: %d orders with their event_seq and %d order.paid events in MySQL, want %d of each", activity, rows, events, n)
		}
		for _, i := range []int{0, 255, 256, 319, 320, 327, 328, 329, 330} { // the first and last of each chunk
			s := NewOrders(db)
			got, err := s.Get(ctx, os[i].No)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got.UserID != os[i].UserID || got.Quantity != os[i].Quantity || got.AmountCents != os[i].AmountCents || got.Item != os[i].Item ||
				!got.CreatedAt.Equal(os[i].CreatedAt) {
				t.Fatalf("order %d of %d: MySQL has %+v, written %+v", i, n, got, os[i])
			}
		}
	}

	s := NewOrders(db)
	os := orders(41)
	if err := s.WriteMany(ctx, os); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check(41, os)
	for _, k := range []int{8, 6, 3, 1, 0} { // 256, 64, 8, 2, 1
		v, ok := statements.Load(stmtKey{sqlDB, eventsInsert.texts[k]})
		if _, prepared := v.(*sql.Stmt); !ok || !prepared {
			t.Fatalf("the statement of %d events was not prepared: %v", 1<<k, v)
		}
	}

	// gorm's prepared-statement mode wraps the transaction: text.
	s = NewOrders(db.Session(&gorm.Session{PrepareStmt: true}))
	os = orders(42)
	if err := s.WriteMany(ctx, os); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check(42, os)
}

// A statement the server refuses to prepare is not asked for again until
// retryPrepare has passed: the rows go as text meanwhile.
func TestPrepared_refused_isNotAskedAgainAtOnce(t *testing.T) {
	sqlDB, _ := migratedDB(t).DB()
	ctx := context.Background()
	const text = "INSERT INTO no_such_table (a) VALUES (?)"
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if s := prepared(ctx, sqlDB, tx, text); s != nil {
		t.Fatal("a statement on a missing table was prepared")
	}
	v, _ := statements.Load(stmtKey{sqlDB, text})
	until, ok := v.(time.Time)
	if !ok || time.Until(until) < retryPrepare-time.Second || time.Until(until) > retryPrepare {
		t.Fatalf("after the refusal the cache holds %v, want a retry time %v from now", v, retryPrepare)
	}
	if err := sqlDB.Close(); err != nil {
		t.Fatal(err)
	}
	// The database is closed: asking it again would fail with another
	// error and store another time.
	if s := prepared(ctx, sqlDB, tx, text); s != nil {
		t.Fatal("prepared on a closed database")
	}
	if v2, _ := statements.Load(stmtKey{sqlDB, text}); v2 != v {
		t.Fatalf("the refused statement was prepared again within retryPrepare: %v, then %v", v, v2)
	}
}

// A connection prepares each chunk's statement once: the second batch of
// the same size prepares nothing and executes one statement a chunk, by
// the server's own count (the pool cut to one connection after the first
// batch, so that its session's counters are the writes'; the first needs
// a second one to prepare on).
func TestMultiRow_preparesOnceAConnection(t *testing.T) {
	db := migratedDB(t)
	sqlDB, _ := db.DB()
	counters := func() (prepares, executes int64) {
		rows, err := db.Raw("SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute')").Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			if name == "Com_stmt_prepare" {
				prepares = v
			} else {
				executes = v
			}
		}
		return prepares, executes
	}
	write := func(activity int64) { writeOrders(t, db, activity, 331) }
	write(51)
	sqlDB.SetMaxOpenConns(1)
	p0, e0 := counters()
	write(52)
	p1, e1 := counters()
	if p1 != p0 || e1-e0 != 5 {
		t.Fatalf("the second batch of 331: %d prepares and %d executes, want 0 and 5 (256, 64, 8, 2, 1 order.paid events)", p1-p0, e1-e0)
	}
}

// A connection that cannot prepare the statement (the server holds
// max_prepared_stmt_count already) gets the batch as text, and the text
// goes as text for retryPrepare: the write goes through, where it would
// fail, and fail again on every retry, until the server had room. A
// mariadbd of the test's own: it changes a global.
func TestMultiRow_connectionRefusingToPrepare_getsText(t *testing.T) {
	_, dsn := testenv.StartMariaDB(t)
	db, err := connect.MySQL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	ctx := context.Background()
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	write := func(activity int64) {
		t.Helper()
		writeOrders(t, db, activity, 300) // 256, 32, 8, 4
		var rows int64
		db.Model(&OrderRow{}).Where("activity_id = ?", activity).Count(&rows)
		if rows != 300 {
			t.Fatalf("activity %d: %d rows, want 300", activity, rows)
		}
	}
	write(61) // prepared, on the connections it used
	if v, _ := statements.Load(stmtKey{sqlDB, eventsInsert.texts[8]}); !isStmt(v) {
		t.Fatal("the first batch's statement was not prepared")
	}
	if err := db.Exec("SET GLOBAL max_prepared_stmt_count = 0").Error; err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxIdleConns(0) // the next batch on a new connection, which cannot prepare
	write(62)
	v, _ := statements.Load(stmtKey{sqlDB, eventsInsert.texts[8]})
	if _, ok := v.(time.Time); !ok {
		t.Fatalf("after the refusal the statement's cache holds %T, want a time to try again", v)
	}
}

// writeOrders writes n paid orders of activity in one WriteMany: n rows of
// orders, n order.paid events.
func writeOrders(t *testing.T, db *gorm.DB, activity int64, n int) {
	t.Helper()
	os := make([]order.Order, n)
	for i := range os {
		os[i] = order.Order{No: order.NewNo(activity), ActivityID: activity, UserID: int64(i + 1), Quantity: 1,
			PriceCents: 100, AmountCents: 100, Status: order.Paid, Fence: 2, CreatedAt: time.Now(), PaidAt: time.Now(),
			PaymentID: fmt.Sprintf("pi_%d", i), Item: "X"}
	}
	s := NewOrders(db)
	defer s.Close()
	if err := s.WriteMany(context.Background(), os); err != nil {
		t.Fatalf("activity %d: %v", activity, err)
	}
}

// isStmt says the statements' cache holds a prepared statement in v.
func isStmt(v any) bool { _, ok := v.(*sql.Stmt); return ok }
