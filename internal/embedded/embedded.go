// Package embedded runs the service's two dependencies for embedded mode
// (neither REDIS_URL nor MYSQL_DSN set), for trying flashsale with nothing
// to set up. Two ways (Mode):
//
//   - Servers: redis-server and mariadbd as child processes of this one, on
//     free loopback ports, their files in a temp directory removed at Close.
//     Chosen by default whenever both are installed (Auto): a sale of any
//     size sells, persists and is read as against real servers, because it
//     is real servers (servers.go).
//   - Memory: miniredis and go-mysql-server inside the process, for a
//     machine with neither installed (memory.go). It runs the very same
//     MySQL migrations and SQL through the very same gorm MySQL driver, but
//     its in-memory tables scan every row of a table for each row written,
//     so writes slow down as the orders table grows (a 500-row upsert took
//     0.2 s with 2,500 orders in the table and 4 s with 30,000, issue 39):
//     a sale there is limited to MaxMemoryStock units, refused at creation
//     above it with the reason.
//
// Either way everything is lost when the process exits.
package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DatabaseName is the database the embedded SQL server holds.
const DatabaseName = "flashsale"

// Mode is how embedded mode runs Redis and MySQL (EMBEDDED_MODE).
type Mode string

// The modes.
const (
	// Auto is Servers when redis-server, mariadbd and mariadb-install-db
	// are installed (on PATH, or in /usr/sbin), else Memory.
	Auto Mode = "auto"
	// Servers runs redis-server and mariadbd as child processes.
	Servers Mode = "servers"
	// Memory runs miniredis and go-mysql-server in the process.
	Memory Mode = "memory"
)

// MaxMemoryStock is the most units a sale may have in Memory mode
// (Stack.MaxStock): such a sale is persisted within seconds of its
// sell-out while every route answers; at 5,000 units reads began to wait
// past REQUEST_TIMEOUT, as the worker's writes of rows already there (a
// change, a sync queued twice) grew slow (docs/benchmarks.md, "Embedded
// mode"). The table holds every sale's orders: many sales add up.
const MaxMemoryStock = 2_000

// Stack is a running pair of embedded servers.
type Stack struct {
	// RedisURL and MySQLDSN point at the servers, as REDIS_URL and
	// MYSQL_DSN would.
	RedisURL string
	MySQLDSN string
	// Mode is what runs: Servers or Memory.
	Mode Mode
	// Dir holds the servers' files (Servers mode): removed at Close.
	Dir string
	// MaxStock, when above 0, is the most units a sale may have on this
	// stack, and MaxStockReason says why (Memory mode).
	MaxStock       int
	MaxStockReason string
	// WriteBatch, when above 0, is the most orders one statement should
	// write here (mysqlstore.WriteOptions.Max), and WriteTarget how long
	// one should take (WriteOptions.Target): Memory mode's.
	WriteBatch  int
	WriteTarget time.Duration

	memory  *memoryStack
	servers *serverStack
}

// Start runs the servers mode asks for.
func Start(log *slog.Logger, mode Mode) (*Stack, error) {
	switch mode {
	case "", Auto:
		if missing := missingServers(); len(missing) > 0 {
			log.Warn("embedded mode: running Redis and MySQL in memory, whose sales are limited to "+
				fmt.Sprint(MaxMemoryStock)+" units; install redis-server and mariadb-server for real ones", "missing", missing)
			return startMemory(log)
		}
		return startServers(log)
	case Servers:
		if missing := missingServers(); len(missing) > 0 {
			return nil, fmt.Errorf("EMBEDDED_MODE=servers: %v not found on PATH (apt-get install redis-server mariadb-server)", missing)
		}
		return startServers(log)
	case Memory:
		return startMemory(log)
	default:
		return nil, fmt.Errorf("EMBEDDED_MODE %q: want auto, servers or memory", mode)
	}
}

// RepairedTables is how many tables the in-memory SQL server rebuilt after
// rolled-back transactions (Memory mode; tests).
func (s *Stack) RepairedTables() int64 {
	if s.memory == nil {
		return 0
	}
	return s.memory.repair.n.Load()
}

// Close stops both servers; their data is gone.
func (s *Stack) Close() error {
	var errs []error
	if s.memory != nil {
		errs = append(errs, s.memory.close())
	}
	if s.servers != nil {
		errs = append(errs, s.servers.close())
	}
	return errors.Join(errs...)
}
