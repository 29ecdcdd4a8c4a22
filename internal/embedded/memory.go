package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
	querypb "github.com/dolthub/vitess/go/vt/proto/query"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.redis.Close()
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	m.sql, err = server.NewServer(server.Config{Protocol: "tcp", Address: addr, Options: []server.Option{serialize}},
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

// serialize makes the SQL server run one command at a time (see
// memoryStack).
func serialize(e *sqle.Engine, sm *server.SessionManager, h mysql.Handler) (*sqle.Engine, *server.SessionManager, mysql.Handler) {
	return e, sm, &serialHandler{Handler: h, turns: newTurns()}
}

// turns lets one command run at a time, and a read that waits go before
// any write that waits. A read then waits for at most the one write
// running, not for every write queued before it: the api's public view,
// its admin reads and /readyz answer while the worker drains a backlog of
// orders (issue 39: with one FIFO lock they waited behind every upsert
// queued, up to a minute, and answered 503). Writes wait while reads keep
// coming; the reads that come are a few a second.
//
// A transaction owns the writes from its BEGIN to its COMMIT or ROLLBACK:
// go-mysql-server's in-memory transactions are not isolated from each
// other's commits, and interleaved they lost and doubled rows (the
// worker's order batches write rows and events in one; issue 41's
// producers; TestStack_concurrentTransactions_loseAndDoubleNothing). While
// one is open, other connections' writes wait; reads do not.
type turns struct {
	mu      sync.Mutex
	cond    *sync.Cond
	busy    bool
	readers int    // reads waiting
	owner   uint32 // the connection whose transaction is open, 0 none
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
	for t.busy || !read && (t.readers > 0 || t.owner != 0 && t.owner != conn) {
		t.cond.Wait()
	}
	if read {
		t.readers--
	}
	t.busy = true
	t.mu.Unlock()
}

// done ends conn's turn, whose command q opened or ended its transaction,
// or neither.
func (t *turns) done(conn uint32, q string) {
	t.mu.Lock()
	t.busy = false
	switch {
	case begins(q):
		t.owner = conn
	case ends(q) && t.owner == conn:
		t.owner = 0
	}
	t.mu.Unlock()
	t.cond.Broadcast()
}

// begins tells a query that opens a transaction; ends one that ends it
// (not a ROLLBACK TO SAVEPOINT).
func begins(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return hasPrefixFold(q, "BEGIN") || hasPrefixFold(q, "START TRANSACTION")
}

func ends(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return hasPrefixFold(q, "COMMIT") ||
		hasPrefixFold(q, "ROLLBACK") && !strings.Contains(strings.ToUpper(q), " TO ")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
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
	turns *turns
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) error {
	if !kills(q) {
		h.turns.take(reads(q), c.ConnectionID)
		defer h.turns.done(c.ConnectionID, q)
	}
	return h.Handler.ComQuery(ctx, c, q, cb)
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) (string, error) {
	h.turns.take(false, c.ConnectionID)
	defer h.turns.done(c.ConnectionID, q)
	return h.Handler.ComMultiQuery(ctx, c, q, cb)
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, q string, p *mysql.PrepareData) ([]*querypb.Field, error) {
	h.turns.take(true, c.ConnectionID) // prepares, writes nothing
	defer h.turns.done(c.ConnectionID, "")
	return h.Handler.ComPrepare(ctx, c, q, p)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, p *mysql.PrepareData, cb func(*sqltypes.Result) error) error {
	h.turns.take(reads(p.PrepareStmt), c.ConnectionID)
	defer h.turns.done(c.ConnectionID, p.PrepareStmt)
	return h.Handler.ComStmtExecute(ctx, c, p, cb)
}

func (h *serialHandler) ComInitDB(c *mysql.Conn, schema string) error {
	h.turns.take(true, c.ConnectionID) // a new connection's first command: a session's, writes nothing
	defer h.turns.done(c.ConnectionID, "")
	return h.Handler.ComInitDB(c, schema)
}

func (h *serialHandler) ComResetConnection(c *mysql.Conn) error {
	h.turns.take(true, c.ConnectionID)
	defer h.turns.done(c.ConnectionID, "ROLLBACK") // a reset session's transaction is over
	return h.Handler.ComResetConnection(c)
}

// ConnectionClosed releases the connection's locks and ends its session.
func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	h.turns.take(false, c.ConnectionID)
	defer h.turns.done(c.ConnectionID, "ROLLBACK") // its transaction, if any, is over
	h.Handler.ConnectionClosed(c)
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
