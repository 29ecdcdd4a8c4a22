package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
	"github.com/dolthub/vitess/go/vt/sqlparser"
	"github.com/sirupsen/logrus"
)

// memoryStack is Memory mode: an in-memory Redis (miniredis) and an
// in-memory SQL server that speaks the MySQL protocol (go-mysql-server).
//
// go-mysql-server rather than an embedded SQLite: it runs the very same
// MySQL migrations and SQL (INSERT IGNORE, ON DUPLICATE KEY UPDATE,
// conditional UPDATE … WHERE fence < ?) through the very same gorm MySQL
// driver, so embedded mode exercises the production code paths instead of a
// second dialect.
//
// go-mysql-server's in-memory tables are not safe for concurrent use:
// inserts from concurrent connections lose rows and race with readers
// (TestStack_concurrentWritersAndReaders_loseNothing), so the server runs one
// command at a time (turns), a waiting read before any waiting write.
type memoryStack struct {
	redis *miniredis.Miniredis
	sql   *server.Server
	stop  chan struct{}
	wg    sync.WaitGroup
	// repair rebuilds the tables of rolled-back transactions.
	repair *repairer
}

// startMemory runs both servers on free loopback ports.
func startMemory(log *slog.Logger) (*Stack, error) {
	// go-mysql-server logs every connection at info and warns about
	// secure_file_priv, which an in-memory demo database does not use.
	logrus.SetLevel(logrus.ErrorLevel)

	m := &memoryStack{stop: make(chan struct{})}
	st := &Stack{Mode: Memory, memory: m, MaxStock: MaxMemoryStock, WriteBatch: memoryWriteBatch, WriteTarget: memoryWriteTarget,
		MaxStockReason: "embedded mode runs MySQL in memory (go-mysql-server), whose writes slow down as the orders table grows; " +
			"install redis-server and mariadb-server for embedded mode to run them instead, or set REDIS_URL and MYSQL_DSN"}
	m.redis = miniredis.NewMiniRedis()
	if err := m.redis.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	st.RedisURL = "redis://" + m.redis.Addr() + "/0"
	// miniredis only expires keys when told time has passed: advance its
	// clock with the wall clock so lock and payment ttls run out.
	m.wg.Add(1)
	go m.tick()

	db := memory.NewDatabase(DatabaseName)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	provider := memory.NewDBProvider(db)
	engine := sqle.NewDefault(provider)
	m.repair = &repairer{provider: provider, log: log}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.redis.Close()
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	m.sql, err = server.NewServer(server.Config{Protocol: "tcp", Address: addr, Options: []server.Option{serialize(m.repair)}},
		engine, gmssql.NewContext, memory.NewSessionBuilder(provider), nil)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("embedded mysql: %w", err)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.sql.Start(); err != nil {
			log.Error("embedded mysql stopped", "err", err)
		}
	}()
	st.MySQLDSN = "root@tcp(" + addr + ")/" + DatabaseName + "?parseTime=true"
	if err := waitDial(addr, 5*time.Second); err != nil {
		st.Close()
		return nil, fmt.Errorf("embedded mysql: %w", err)
	}
	return st, nil
}

// memoryWriteBatch and memoryWriteTarget keep each statement of the
// worker's short on the in-memory server, which runs one at a time: an
// upsert that changes a row already there (a status change, an order
// written twice) deletes and inserts it, scanning the table and its
// indexes, 0.1 s a row with 2,500 orders in the table and 2 s with 10,000
// (inserting a new one costs a hundredth of that), so a batch of 500
// changes held every read for a minute. 20 rows at most: a few seconds at
// the worst.
const (
	memoryWriteBatch  = 20
	memoryWriteTarget = 250 * time.Millisecond
)

// serialize makes the SQL server run one command at a time (see turns),
// and repairs the tables a transaction wrote when it is rolled back
// (repair).
func serialize(r *repairer) server.Option {
	return func(e *sqle.Engine, sm *server.SessionManager, h mysql.Handler) (*sqle.Engine, *server.SessionManager, mysql.Handler) {
		r.e = e
		return e, sm, &serialHandler{Handler: h, turns: newTurns(), repair: r}
	}
}

// turns lets one command run at a time, and a read that waits go before
// any write that waits. A read then waits for at most the one write
// running, not for every write queued before it: the api's public view,
// its admin reads and /readyz answer while the worker drains a backlog of
// orders (issue 39: with one FIFO lock they waited behind every upsert
// queued, up to a minute, and answered 503). Writes wait while reads keep
// coming; the reads that come are a few a second.
//
// A transaction owns the server from its BEGIN to its COMMIT or ROLLBACK:
// while one is open, other connections' commands wait, reads too (a read
// then waits for at most the one transaction open). go-mysql-server's
// in-memory transactions are neither isolated from each other's commits
// (interleaved, they lost and doubled rows: the worker's order batches
// write rows and events in one; issue 41's producers;
// TestStack_concurrentTransactions_loseAndDoubleNothing) nor from its
// reads: a session's copy of a table shares each index entry with the
// table everyone reads, and a write that moves rows (an update, a
// delete) renumbers the entries in place, so a read beside an open
// transaction that had written found, through an index, other rows than
// the ones there (TestStack_memory_readsBesideAnOpenTransaction_findTheirRows).
type turns struct {
	mu      sync.Mutex
	cond    *sync.Cond
	busy    bool
	readers int    // reads waiting
	owner   uint32 // the connection whose transaction is open, 0 none
	// written names the tables the open transaction wrote to, "" for a
	// statement whose tables could not be told (every table then).
	written map[string]bool
}

func newTurns() *turns {
	t := &turns{}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// take waits for conn's turn; read says the command only reads.
func (t *turns) take(read bool, conn uint32) {
	t.mu.Lock()
	if read {
		t.readers++
	}
	for t.busy || t.owner != 0 && t.owner != conn || !read && t.owner != conn && t.readers > 0 {
		t.cond.Wait()
	}
	if read {
		t.readers--
	}
	t.busy = true
	t.mu.Unlock()
}

// ran records that conn's command q ran in its turn (which it still
// holds), and returns the tables to repair before the turn ends: those
// its transaction wrote, when q (or the connection's end, q "ROLLBACK")
// rolled it back.
func (t *turns) ran(conn uint32, q string, read bool) (repair map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case begins(q):
		t.owner, t.written = conn, nil
	case t.owner != conn:
	case ends(q):
		if rollsBack(q) && len(t.written) > 0 {
			repair = t.written
		}
		t.owner, t.written = 0, nil
	case !read:
		if t.written == nil {
			t.written = map[string]bool{}
		}
		for _, name := range tablesOf(q) {
			t.written[name] = true
		}
	}
	return repair
}

// done ends the turn taken.
func (t *turns) done() {
	t.mu.Lock()
	t.busy = false
	t.mu.Unlock()
	t.cond.Broadcast()
}

// begins tells a query that opens a transaction; ends one that ends it
// (not a ROLLBACK TO SAVEPOINT); rollsBack one of those that rolls it
// back.
func begins(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return hasPrefixFold(q, "BEGIN") || hasPrefixFold(q, "START TRANSACTION")
}

func ends(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return hasPrefixFold(q, "COMMIT") || rollsBack(q)
}

func rollsBack(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return hasPrefixFold(q, "ROLLBACK") && !strings.Contains(strings.ToUpper(q), " TO ")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// tablesOf names the tables statement q mentions (those it writes among
// them: none for a SET), or "" when it cannot tell.
func tablesOf(q string) []string {
	stmt, err := sqlparser.Parse(q)
	if err != nil {
		return []string{""}
	}
	var names []string
	_ = sqlparser.Walk(func(node sqlparser.SQLNode) (bool, error) {
		if tn, ok := node.(sqlparser.TableName); ok && tn.Name.String() != "" {
			names = append(names, strings.ToLower(tn.Name.String()))
		}
		return true, nil
	}, stmt)
	return names
}

// reads tells a query that only reads (a SELECT, a SHOW) from one that
// may write.
func reads(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n(")
	for _, kw := range []string{"SELECT", "SHOW", "DESCRIBE", "EXPLAIN"} {
		if len(q) >= len(kw) && strings.EqualFold(q[:len(kw)], kw) {
			return !strings.Contains(strings.ToUpper(q), " FOR UPDATE")
		}
	}
	return false
}

// kills tells a KILL, which runs outside the turns: it only ends another
// connection's query, which may be the one holding the turn.
func kills(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return len(q) >= 4 && strings.EqualFold(q[:4], "KILL")
}

// serialHandler runs every command that touches data in turn (turns).
type serialHandler struct {
	mysql.Handler
	turns  *turns
	repair *repairer
}

// command runs a command of conn's, q its statement, in conn's turn.
func (h *serialHandler) command(conn uint32, q string, read bool, run func()) {
	h.turns.take(read, conn)
	defer h.turns.done()
	run()
	if tables := h.turns.ran(conn, q, read); tables != nil {
		h.repair.tables(tables)
	}
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) (err error) {
	if kills(q) {
		return h.Handler.ComQuery(ctx, c, q, cb)
	}
	h.command(c.ConnectionID, q, reads(q), func() { err = h.Handler.ComQuery(ctx, c, q, cb) })
	return err
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) (rest string, err error) {
	h.command(c.ConnectionID, q, false, func() { rest, err = h.Handler.ComMultiQuery(ctx, c, q, cb) })
	return rest, err
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, q string, p *mysql.PrepareData) (f []*querypb.Field, err error) {
	h.command(c.ConnectionID, "", true, func() { f, err = h.Handler.ComPrepare(ctx, c, q, p) }) // prepares, writes nothing
	return f, err
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, p *mysql.PrepareData, cb func(*sqltypes.Result) error) (err error) {
	h.command(c.ConnectionID, p.PrepareStmt, reads(p.PrepareStmt), func() { err = h.Handler.ComStmtExecute(ctx, c, p, cb) })
	return err
}

func (h *serialHandler) ComInitDB(c *mysql.Conn, schema string) (err error) {
	// a new connection's first command: a session's, writes nothing
	h.command(c.ConnectionID, "", true, func() { err = h.Handler.ComInitDB(c, schema) })
	return err
}

func (h *serialHandler) ComResetConnection(c *mysql.Conn) (err error) {
	// a reset session's transaction is over, rolled back
	h.command(c.ConnectionID, "ROLLBACK", true, func() { err = h.Handler.ComResetConnection(c) })
	return err
}

// ConnectionClosed releases the connection's locks and ends its session
// (its transaction, if any, rolled back).
func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	h.command(c.ConnectionID, "ROLLBACK", false, func() { h.Handler.ConnectionClosed(c) })
}

// repairer rebuilds the tables a rolled-back transaction wrote to.
//
// go-mysql-server's in-memory tables keep each index as a list of entries
// that say where their row is, and a session's copy of a table shares
// those entries with the table everyone reads. A write that moves rows
// (an update deletes the row and appends it; every statement then sorts
// the rows by primary key) renumbers the entries in place. A commit makes
// the session's copy the table, whose entries are right for it; a
// rollback drops the copy and leaves the table with its old rows and the
// renumbered entries: lookups through an index found other rows than the
// ones asked for, the same row twice and another never (an embedded sale
// of 2,000 saw an order twice and one missing, CI 2026-11-30;
// TestStack_memory_rolledBackUpdates_leaveIndexesRight). No statement
// rebuilds an index of rows already there, so the rows are copied out to
// a table like it through a scan (which reads rows, not an index), the
// table emptied (TRUNCATE drops the entries too) and the rows inserted
// back. It costs as much as inserting every row twice — orders of 2,000
// took 1.5 s here, 12 s under the race detector (2026-11-30), the server
// answering nothing meanwhile — and rollbacks after a write are rare: a
// memory sale of 2,000 had none (a write that failed, or whose client
// went away, rolls back).
type repairer struct {
	e        *sqle.Engine
	provider *memory.DbProvider
	log      *slog.Logger
	n        atomic.Int64 // tables rebuilt (tests)
}

// tables rebuilds the tables named ("" for all of them).
func (r *repairer) tables(names map[string]bool) {
	ctx := r.context()
	all, err := r.query(ctx, "SELECT table_name, COALESCE(auto_increment, 0) FROM information_schema.tables WHERE table_schema = '"+
		DatabaseName+"' AND table_type = 'BASE TABLE'")
	if err != nil {
		r.log.Error("embedded mysql: a rolled-back transaction's tables not repaired", "err", err)
		return
	}
	for _, row := range all {
		name, _ := row[0].(string)
		if !names[""] && !names[strings.ToLower(name)] {
			continue
		}
		start := time.Now()
		if err := r.table(ctx, name, fmt.Sprint(row[1])); err != nil {
			r.log.Error("embedded mysql: a rolled-back transaction's table not repaired", "table", name, "err", err)
			continue
		}
		r.n.Add(1)
		r.log.Info("embedded mysql: rebuilt a table a rolled-back transaction wrote", "table", name, "took", time.Since(start))
	}
}

// table rebuilds one table, keeping next, its next auto-increment value
// ("0" or "<nil>": none).
func (r *repairer) table(ctx *gmssql.Context, name, next string) error {
	// Not a copy renamed to the table's name: go-mysql-server's renamed
	// table found nothing through some of its indexes. TRUNCATE empties
	// the rows and the indexes' entries both.
	t, tmp := "`"+name+"`", "`"+name+"__rows`"
	stmts := []string{"DROP TABLE IF EXISTS " + tmp, "CREATE TABLE " + tmp + " LIKE " + t,
		"INSERT INTO " + tmp + " SELECT * FROM " + t, "TRUNCATE TABLE " + t, "INSERT INTO " + t + " SELECT * FROM " + tmp,
		"DROP TABLE " + tmp}
	if next != "0" && next != "<nil>" {
		stmts = append(stmts, "ALTER TABLE "+t+" AUTO_INCREMENT = "+next)
	}
	for _, q := range stmts {
		if _, err := r.query(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func (r *repairer) context() *gmssql.Context {
	ctx := gmssql.NewContext(context.Background(), gmssql.WithSession(memory.NewSession(gmssql.NewBaseSession(), r.provider)))
	ctx.SetCurrentDatabase(DatabaseName)
	return ctx
}

func (r *repairer) query(ctx *gmssql.Context, q string) ([]gmssql.Row, error) {
	_, iter, _, err := r.e.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	return gmssql.RowIterToRows(ctx, iter)
}

func (m *memoryStack) tick() {
	defer m.wg.Done()
	const step = 50 * time.Millisecond
	t := time.NewTicker(step)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.redis.FastForward(now.Sub(last))
			last = now
		}
	}
}

func waitDial(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// close stops both servers; their data is gone.
func (m *memoryStack) close() error {
	select {
	case <-m.stop:
		return nil
	default:
		close(m.stop)
	}
	var err error
	if m.sql != nil {
		err = m.sql.Close()
	}
	m.redis.Close()
	m.wg.Wait()
	return err
}
