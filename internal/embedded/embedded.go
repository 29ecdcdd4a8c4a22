// Package embedded runs the service's two dependencies inside the process,
// for trying flashsale with nothing installed: an in-memory Redis
// (miniredis) and an in-memory SQL server that speaks the MySQL protocol
// (go-mysql-server).
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
// command at a time. A demo's load fits easily.
//
// Everything lives in memory and is lost when the process exits.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"net"
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

// DatabaseName is the database the embedded SQL server holds.
const DatabaseName = "flashsale"

// Stack is a running pair of embedded servers.
type Stack struct {
	// RedisURL and MySQLDSN point at the servers, as REDIS_URL and MYSQL_DSN would.
	RedisURL string
	MySQLDSN string

	redis *miniredis.Miniredis
	sql   *server.Server
	stop  chan struct{}
	wg    sync.WaitGroup
}

// Start runs both servers on free loopback ports.
func Start(log *slog.Logger) (*Stack, error) {
	// go-mysql-server logs every connection at info and warns about
	// secure_file_priv, which an in-memory demo database does not use.
	logrus.SetLevel(logrus.ErrorLevel)

	s := &Stack{stop: make(chan struct{})}
	s.redis = miniredis.NewMiniRedis()
	if err := s.redis.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	s.RedisURL = "redis://" + s.redis.Addr() + "/0"
	// miniredis only expires keys when told time has passed: advance its
	// clock with the wall clock so lock and payment ttls run out.
	s.wg.Add(1)
	go s.tick()

	db := memory.NewDatabase(DatabaseName)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	provider := memory.NewDBProvider(db)
	engine := sqle.NewDefault(provider)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.redis.Close()
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s.sql, err = server.NewServer(server.Config{Protocol: "tcp", Address: addr, Options: []server.Option{serialize}},
		engine, gmssql.NewContext, memory.NewSessionBuilder(provider), nil)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("embedded mysql: %w", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.sql.Start(); err != nil {
			log.Error("embedded mysql stopped", "err", err)
		}
	}()
	s.MySQLDSN = "root@tcp(" + addr + ")/" + DatabaseName + "?parseTime=true"
	if err := waitDial(addr, 5*time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("embedded mysql: %w", err)
	}
	return s, nil
}

// serialize makes the SQL server run one command at a time (see the
// package comment).
func serialize(e *sqle.Engine, sm *server.SessionManager, h mysql.Handler) (*sqle.Engine, *server.SessionManager, mysql.Handler) {
	return e, sm, &serialHandler{Handler: h}
}

// serialHandler runs every command that touches data under one mutex.
type serialHandler struct {
	mysql.Handler
	mu sync.Mutex
}

func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComQuery(ctx, c, q, cb)
}

func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, q string, cb mysql.ResultSpoolFn) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComMultiQuery(ctx, c, q, cb)
}

func (h *serialHandler) ComPrepare(ctx context.Context, c *mysql.Conn, q string, p *mysql.PrepareData) ([]*querypb.Field, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComPrepare(ctx, c, q, p)
}

func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, p *mysql.PrepareData, cb func(*sqltypes.Result) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComStmtExecute(ctx, c, p, cb)
}

func (h *serialHandler) ComInitDB(c *mysql.Conn, schema string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComInitDB(c, schema)
}

func (h *serialHandler) ComResetConnection(c *mysql.Conn) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Handler.ComResetConnection(c)
}

// ConnectionClosed releases the connection's locks and ends its session.
func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Handler.ConnectionClosed(c)
}

func (s *Stack) tick() {
	defer s.wg.Done()
	const step = 50 * time.Millisecond
	t := time.NewTicker(step)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.redis.FastForward(now.Sub(last))
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

// Close stops both servers; their data is gone.
func (s *Stack) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
		close(s.stop)
	}
	var err error
	if s.sql != nil {
		err = s.sql.Close()
	}
	s.redis.Close()
	s.wg.Wait()
	return err
}
