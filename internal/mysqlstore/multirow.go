package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// multiRow is a multi-row INSERT that the batches send (the outbox's
// events: AppendTx), sent as prepared statements of a fixed number of rows
// each.
//
// Why (issue 43): sent as text, with every argument interpolated into it
// (the DSN's interpolateParams, connect.MySQL), MariaDB parses each value
// of a batch of hundreds of rows as a literal, names it and converts it,
// the events' escaped JSON bodies most of all: the parse was about a third
// of its CPU in the worker's write (perf, in docs/benchmarks.md), and a
// prepared statement of the same events, their values sent in the binary
// protocol, cost it 22–28% less an event in four runs side by side. (The
// orders' upsert, of numbers and short names, gained nothing prepared: it
// stays text, mysqlstore.upsert.) A prepared statement has a fixed number
// of placeholders, so a batch of n rows is sent as chunks of power-of-two
// rows, the largest first (330: 256, 64, 8 and 2): a connection prepares
// at most 11 statements of the events' INSERT, once, and a batch costs a
// round trip a chunk (a few in a transaction that is one round trip a
// statement anyway).
//
// Each statement is prepared once a database (*sql.DB, which prepares it
// again on each connection it is used on, once) and kept for the
// process's life. Where no statement can be prepared (the server refuses,
// on a connection of the pool or on the transaction's own, or the pool
// has no connection free within prepareWait) or the transaction is not
// database/sql's, the rows go as one text statement, as before: a server
// at max_prepared_stmt_count slows the writes down, and never stops them.
type multiRow struct {
	head   string                  // up to VALUES
	row    string                  // one row's placeholders, "(?,…)"
	tail   string                  // after the rows (ON DUPLICATE KEY …)
	perRow int                     // placeholders a row
	texts  [maxChunkLog + 1]string // by log2 of the rows, up to maxK
	maxK   int
}

// maxPlaceholders bounds a chunk's placeholders (MySQL takes 65,535 a
// statement); maxChunkLog bounds its rows at 2^maxChunkLog.
const (
	maxPlaceholders = 8192
	maxChunkLog     = 12
)

// prepareWait bounds the preparing of a statement on a connection of its
// own (sql.DB.PrepareContext), which the transaction asking for it waits
// on while it holds a connection of the pool itself.
const prepareWait = 2 * time.Second

func newMultiRow(head, row, tail string) *multiRow {
	m := &multiRow{head: head, row: row, tail: tail, perRow: strings.Count(row, "?")}
	for k := range m.texts {
		if n := 1 << k; n*m.perRow <= maxPlaceholders {
			m.texts[k], m.maxK = m.text(n), k
		}
	}
	return m
}

// text is the statement of n rows.
func (m *multiRow) text(n int) string {
	var b strings.Builder
	b.Grow(len(m.head) + n*(len(m.row)+1) + len(m.tail))
	b.WriteString(m.head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(m.row)
	}
	b.WriteString(m.tail)
	return b.String()
}

// chunk is the rows of the next statement for n rows left: the largest
// power of two not above n that a statement holds, and its texts' index.
func (m *multiRow) chunk(n int) (rows, k int) {
	k = min(bits.Len(uint(n))-1, m.maxK)
	return 1 << k, k
}

// exec inserts n rows of args (perRow each) in tx.
func (m *multiRow) exec(tx *gorm.DB, n int, args []any) error {
	ctx := tx.Statement.Context
	db, dbOK := tx.Config.ConnPool.(*sql.DB)
	stx, txOK := tx.Statement.ConnPool.(*sql.Tx)
	if !dbOK || !txOK {
		return execDirect(tx, m.text(n), args...)
	}
	for n > 0 {
		rows, k := m.chunk(n)
		stmt := prepared(ctx, db, stx, m.texts[k])
		if stmt == nil {
			return execDirect(tx, m.text(n), args...)
		}
		_, err := stx.StmtContext(ctx, stmt).ExecContext(ctx, args[:rows*m.perRow]...)
		if refusedPrepare(err) {
			// This connection could not prepare it (a failed prepare
			// leaves the transaction as it was): text, here and for
			// retryPrepare, rather than a write that fails until the
			// server has room again.
			refuse(db, m.texts[k])
			return execDirect(tx, m.text(n), args...)
		}
		if err != nil {
			return err
		}
		n, args = n-rows, args[rows*m.perRow:]
	}
	return nil
}

// statements holds the prepared statements by database and text, or,
// for a text whose prepare failed, when to try again (a server that
// refuses, or has max_prepared_stmt_count statements already, is not
// asked again for every batch); and under the empty text, whether the
// database's server prepares right (preparesRight).
var statements sync.Map // stmtKey → *sql.Stmt, time.Time or bool

type stmtKey struct {
	db   *sql.DB
	text string
}

// retryPrepare is how long a text whose prepare failed goes as text.
const retryPrepare = time.Minute

// refusedPrepare says err is the server's refusal to prepare a statement
// on a connection: it holds max_prepared_stmt_count statements already
// (1461), or prepares none (1295).
func refusedPrepare(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1461 || me.Number == 1295)
}

// refuse sends text on db as text for retryPrepare, and closes its
// statement (once the transactions using it are done: database/sql
// defers the close).
func refuse(db *sql.DB, text string) {
	prepareMu.Lock()
	defer prepareMu.Unlock()
	if v, ok := statements.Swap(stmtKey{db, text}, time.Now().Add(retryPrepare)); ok {
		if s, ok := v.(*sql.Stmt); ok {
			_ = s.Close()
		}
	}
}

// prepareMu serializes the prepares (a few dozen in a process's life), so
// that a text is prepared once.
var prepareMu sync.Mutex

// prepared is text prepared on db, or nil where it cannot be now; tx is
// the transaction asking, on whose connection the server is asked what
// it is (preparesRight).
func prepared(ctx context.Context, db *sql.DB, tx *sql.Tx, text string) *sql.Stmt {
	key := stmtKey{db, text}
	look := func() (*sql.Stmt, bool) {
		v, ok := statements.Load(key)
		if !ok {
			return nil, false
		}
		if s, ok := v.(*sql.Stmt); ok {
			return s, true
		}
		return nil, time.Now().Before(v.(time.Time))
	}
	if s, ok := look(); ok {
		return s
	}
	prepareMu.Lock()
	defer prepareMu.Unlock()
	if s, ok := look(); ok {
		return s
	}
	pctx, cancel := context.WithTimeout(ctx, prepareWait)
	defer cancel()
	if !preparesRight(pctx, db, tx) {
		return nil
	}
	s, err := db.PrepareContext(pctx, text)
	if err != nil {
		if ctx.Err() == nil {
			statements.Store(key, time.Now().Add(retryPrepare))
		}
		return nil
	}
	statements.Store(key, s)
	return s
}

// preparesRight says whether db's server runs our prepared statements
// right: every server but go-mysql-server (embedded memory mode), whose
// prepared multi-row upserts lost some rows of a batch and wrote others
// twice (TestEmbedded_memory_saleAtItsLimit_persisted_andOneLarger_refusedAtCreation,
// when they were sent to it). It asks the server once a database (under
// the key of the empty text), and again after retryPrepare when it could
// not, on the asking transaction's own connection: go-mysql-server runs
// one transaction at a time (internal/embedded's turns), so a question on
// another connection would wait for the transaction that asked it.
func preparesRight(ctx context.Context, db *sql.DB, tx *sql.Tx) bool {
	key := stmtKey{db, ""}
	if v, ok := statements.Load(key); ok {
		if right, ok := v.(bool); ok {
			return right
		}
		if time.Now().Before(v.(time.Time)) {
			return false
		}
	}
	var comment string
	if err := tx.QueryRowContext(ctx, "SELECT @@version_comment").Scan(&comment); err != nil {
		statements.Store(key, time.Now().Add(retryPrepare))
		return false
	}
	right := comment != "Dolt" // go-mysql-server's
	statements.Store(key, right)
	return right
}
