package lock

import (
	"context"
	"database/sql"
	"errors"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"
)

// MySQL is the lock kept in a MySQL (or MariaDB) table, fs_locks, created by
// migrations/00001_locks.sql: one row per held lock with its owner token,
// fence and expiry. It offers what the Redis mutex does (owner tokens,
// watchdog renewal, Lost, fencing), for code that must not depend on Redis.
//
//   - obtain: one conditional statement, INSERT … ON DUPLICATE KEY UPDATE,
//     that inserts the row or takes over a row whose expiry has passed;
//     expiry is the database's clock (NOW(6)), so client clocks do not
//     matter. The fence comes from fs_lock_fences in the same transaction.
//   - renew: UPDATE … WHERE name AND owner AND not yet expired.
//   - release: DELETE … WHERE name AND owner.
//
// MySQL has no release notice, so a waiter polls: only one waiter per
// process (the local queue is shared with the mutex's design), with a
// backoff that starts at 2ms, doubles, and never sleeps past the holder's
// expiry or RecheckInterval.
type MySQL struct {
	db    *sql.DB
	cfg   Config
	pid   string
	gates gateSet
}

// NewMySQL returns the MySQL lock on db, whose schema has the lock tables.
func NewMySQL(db *sql.DB, cfg Config) *MySQL {
	return &MySQL{db: db, cfg: cfg.withDefaults(), pid: strconv.Itoa(os.Getpid())}
}

// config is m's Config; the zero Config for a nil m (whose calls fail with
// ErrInvalid rather than panic).
func (m *MySQL) config() Config {
	if m == nil {
		return Config{}
	}
	return m.cfg
}

func (m *MySQL) check(key string, ttl time.Duration, opts []Option) (options, error) {
	if m == nil || m.db == nil {
		return options{}, invalidf("nil database")
	}
	if err := validateKey(key); err != nil {
		return options{}, err
	}
	if err := validateTTL(ttl); err != nil {
		return options{}, err
	}
	return buildOptions(opts)
}

// TryObtain makes one attempt; ErrNotObtained when the lock is held.
func (m *MySQL) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer m.config().timeObtain("mysql", opts, time.Now(), &l, &err)
	o, err := m.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	l, left, err := m.attempt(ctx, key, ttl, o, nil)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, notObtained(key, left.Milliseconds())
	}
	return l, nil
}

// Obtain takes key, polling with backoff as long as ctx allows.
func (m *MySQL) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...Option) (l *Lock, err error) {
	defer m.config().timeObtain("mysql", opts, time.Now(), &l, &err)
	o, err := m.check(key, ttl, opts)
	if err != nil {
		return nil, err
	}
	g, _, err := m.gates.enter(ctx, key, holdSpec{ttl: ttl.Milliseconds(), opts: o})
	if err != nil {
		return nil, canceled(err)
	}
	backoff := 2 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l, left, err := m.attempt(ctx, key, ttl, o, g)
		if l != nil {
			return l, nil
		}
		if err != nil {
			g.leave(grant{})
			return nil, err
		}
		wait := min(backoff, m.cfg.RecheckInterval)
		if left > 0 {
			wait = min(wait, left+time.Millisecond)
		}
		timer.Reset(wait + mrand.N(wait/4+1))
		backoff *= 2
		select {
		case <-timer.C:
		case <-ctx.Done():
			g.leave(grant{})
			return nil, canceled(ctx.Err())
		}
	}
}

const mysqlObtain = `INSERT INTO fs_locks (name, owner, fence, expires_at, meta)
VALUES (?, ?, 0, NOW(6) + INTERVAL ? MICROSECOND, ?)
ON DUPLICATE KEY UPDATE
    owner      = IF(expires_at <= NOW(6), VALUES(owner), owner),
    meta       = IF(expires_at <= NOW(6), VALUES(meta), meta),
    expires_at = IF(expires_at <= NOW(6), VALUES(expires_at), expires_at)`

// attempt tries once. It returns the lock, or nil and the holder's time left.
// Assignments in ON DUPLICATE KEY UPDATE run left to right and see earlier
// ones, so expires_at, which the others test, is assigned last.
func (m *MySQL) attempt(ctx context.Context, key string, ttl time.Duration, o options, g *gate) (*Lock, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, canceled(err)
	}
	token := newToken()
	sent := time.Now()
	meta := m.pid + metaSep + strconv.FormatInt(sent.UnixMilli(), 10) + metaSep + m.cfg.Host + metaSep + o.label
	fence, left, err := m.obtainTx(ctx, key, token, ttl, meta)
	if err != nil {
		// The commit may have happened although its answer was lost.
		go m.deleteRow(key, token)
		if ended(ctx) {
			return nil, 0, canceled(ctxErr(ctx))
		}
		return nil, 0, unavailable("obtain", err)
	}
	if fence == 0 {
		m.cfg.observer("mysql", o).contended()
		return nil, left, nil
	}
	if late(sent, ttl.Milliseconds()) {
		go m.deleteRow(key, token)
		return nil, 0, nil
	}
	h := &mysqlHold{m: m, key: key, token: token, gate: g}
	ls := startLease(h, m.cfg.observer("mysql", o), ttl, o, sent, h.leaveGate)
	return &Lock{since: time.Now(), key: key, fence: fence, lost: ls.lost, lease: ls, hold: h}, 0, nil
}

// obtainTx inserts or takes over the row and mints its fence, in one
// transaction. fence 0 means the lock is held, for left.
func (m *MySQL) obtainTx(ctx context.Context, key, token string, ttl time.Duration, meta string) (fence int64, left time.Duration, err error) {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	res, err := tx.ExecContext(ctx, mysqlObtain, key, token, ttl.Microseconds(), meta)
	if err != nil {
		return 0, 0, err
	}
	n, err := res.RowsAffected() // 1 inserted, 2 taken over, 0 held (1 with clientFoundRows)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		var micros sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM fs_locks WHERE name = ?`, key).Scan(&micros)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, 0, err
		}
		return 0, max(0, time.Duration(micros.Int64)*time.Microsecond), nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO fs_lock_fences (name, fence) VALUES (?, 1)
ON DUPLICATE KEY UPDATE fence = fence + 1`, key); err != nil {
		return 0, 0, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT fence FROM fs_lock_fences WHERE name = ?`, key).Scan(&fence); err != nil {
		return 0, 0, err
	}
	res, err = tx.ExecContext(ctx, `UPDATE fs_locks SET fence = ? WHERE name = ? AND owner = ?`, fence, key, token)
	if err != nil {
		return 0, 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Not our row after all: with clientFoundRows=true in the DSN, an
		// upsert that changed nothing reports 1 row. The rollback takes the
		// fence back.
		return 0, 0, err
	}
	return fence, 0, tx.Commit()
}

func (m *MySQL) deleteRow(key, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = m.db.ExecContext(ctx, `DELETE FROM fs_locks WHERE name = ? AND owner = ?`, key, token)
}

// mysqlHold is one hold of a MySQL lock.
type mysqlHold struct {
	m         *MySQL
	key       string
	token     string
	gate      *gate // nil for TryObtain
	leaveOnce sync.Once
}

func (h *mysqlHold) leaveGate() {
	if h.gate != nil {
		h.leaveOnce.Do(func() { h.gate.leave(grant{}) })
	}
}

func (h *mysqlHold) refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	res, err := h.m.db.ExecContext(ctx, `UPDATE fs_locks SET expires_at = NOW(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND owner = ? AND expires_at > NOW(6)`, ttl.Microseconds(), h.key, h.token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (h *mysqlHold) release(ctx context.Context, l *Lock) error {
	defer h.leaveGate()
	if err := l.lease.stop(ctx); err != nil {
		return err
	}
	res, err := h.m.db.ExecContext(ctx, `DELETE FROM fs_locks WHERE name = ? AND owner = ?`, h.key, h.token)
	if err != nil {
		if ended(ctx) {
			return canceled(ctxErr(ctx))
		}
		return unavailable("release", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		l.lease.markLost()
		return ErrNotHeld
	}
	if l.isLost() {
		return ErrNotHeld
	}
	return nil
}

// Holder reports who holds the MySQL lock key, or ErrNotHeld.
func (m *MySQL) Holder(ctx context.Context, key string) (Holder, error) {
	if err := validateKey(key); err != nil {
		return Holder{}, err
	}
	var owner, meta string
	var fence, micros int64
	err := m.db.QueryRowContext(ctx, `SELECT owner, fence, meta, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at)
FROM fs_locks WHERE name = ? AND expires_at > NOW(6)`, key).Scan(&owner, &fence, &meta, &micros)
	if errors.Is(err, sql.ErrNoRows) {
		return Holder{}, ErrNotHeld
	}
	if err != nil {
		return Holder{}, unavailable("inspect", err)
	}
	h := Holder{Owner: owner[:min(8, len(owner))], Fence: fence, TTL: time.Duration(micros) * time.Microsecond, Count: 1}
	h.setMeta(meta)
	return h, nil
}
