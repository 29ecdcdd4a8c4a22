// Package connect opens the service's Redis and MySQL connections from the
// configured URL and DSN, with the options every caller needs.
package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/flashsale/flashsale/internal/health"
)

// RedisMode says how REDIS_URL is read.
type RedisMode struct {
	// Cluster: REDIS_URL names a Redis Cluster's seed nodes.
	Cluster bool
	// SentinelMaster, when set: REDIS_URL names Sentinels watching the
	// primary of this name, and the client follows whichever server they
	// promote.
	SentinelMaster string
}

// Redis returns a client for a redis:// or rediss:// URL; with m.Cluster a
// Redis Cluster client for redis://host1:port1?addr=host2:port2&… (the seed
// nodes; the client learns the rest); with m.SentinelMaster a client of the
// primary that the sentinels at redis://s1:26379?addr=s2:26379&… name,
// which asks them again on every reconnect and so follows a failover (its
// pub/sub connections too). The URL's password is the primary's and, unless
// a password parameter gives the primary's, the sentinels' as well. It does
// not dial: the service starts while Redis is down and reports it on
// /readyz.
//
// Everything flashsale keeps in Redis works on a cluster because every
// multi-key script and transaction touches one hash slot: an activity's keys
// share {act:<id>}, a lock's share {<name>}, and asynq's share {<queue>}.
func Redis(url string, m RedisMode) (redis.UniversalClient, error) {
	if m.SentinelMaster != "" {
		opt, err := failoverOptions(url, m.SentinelMaster)
		if err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(opt), nil
	}
	if m.Cluster {
		opt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("connect: REDIS_URL (cluster): %w", err)
		}
		opt.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("connect: REDIS_URL: %w", err)
	}
	// Without this go-redis ignores context deadlines on the socket and a
	// stalled server holds a request for ReadTimeout (go-redis v9's default,
	// 5 s; v9.23's options.go) whatever its context.
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// failoverOptions reads REDIS_URL in Sentinel mode: go-redis's
// ParseFailoverURL form, redis[s]://[user:pass@]s1:26379[/db]?addr=s2:26379&…,
// whose user and password are the sentinels' (SentinelUsername,
// SentinelPassword) and whose username and password parameters are the
// primary's. A URL that gives only the former authenticates to the primary
// with them too: one password for the whole group, as the compose file runs
// it. rediss:// turns TLS on for the sentinels and the primary alike, with
// the first sentinel's host as the server name (docs/deploy.md). Unknown
// parameters, sentinel_password say, are refused by go-redis.
func failoverOptions(url, master string) (*redis.FailoverOptions, error) {
	opt, err := redis.ParseFailoverURL(url)
	if err != nil {
		return nil, fmt.Errorf("connect: REDIS_URL (sentinels): %w", err)
	}
	opt.MasterName = master
	if opt.Password == "" {
		opt.Username, opt.Password = opt.SentinelUsername, opt.SentinelPassword
	}
	opt.ContextTimeoutEnabled = true
	if opt.DialTimeout == 0 {
		// A primary that vanished from the network (rather than died on
		// its host, which refuses at once) must cost a request a second,
		// not go-redis's default five, before it answers 503.
		opt.DialTimeout = time.Second
	}
	return opt, nil
}

// MySQL returns a gorm handle for a go-sql-driver DSN. It does not dial
// either (DisableAutomaticPing): a MySQL outage must not stop the API, which
// accepts orders into Redis and lets the worker persist them later.
func MySQL(dsn string) (*gorm.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("connect: MYSQL_DSN: %w", err)
	}
	cfg.ParseTime = true
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	// Statements' arguments are written into their text by the driver:
	// without it every statement with an argument is a server-side
	// prepare, an execute and a close — two round trips and a prepared
	// statement made and dropped in MySQL for each, the worker's batch of
	// 100 orders' upsert (1,600 arguments) included (docs/benchmarks.md,
	// issue 43). The batches' INSERT of events into the outbox is the
	// exception, sent as statements prepared once and kept (mysqlstore's
	// multiRow): its text, every escaped JSON body a literal, cost MariaDB
	// more to parse than to write. Only on the driver's default character
	// set (utf8mb4): its escaping is unsafe under a few multibyte ones
	// (GBK, Big5, SJIS, …), and a DSN that names a charset or collation,
	// or interpolateParams itself, is left as it says (ParseDSN's own check
	// of an unsafe collation ran before this, when interpolateParams was
	// off).
	if !strings.Contains(dsn, "interpolateParams") && !strings.Contains(dsn, "charset") && !strings.Contains(dsn, "collation") {
		cfg.InterpolateParams = true
	}
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{
		DSNConfig: cfg,
		// gorm asks the server for its version at Open, which dials; we
		// target MySQL 8 and MariaDB 10.11 and state what they share instead.
		SkipInitializeWithVersion: true,
		DontSupportForShareClause: true, // MariaDB has only LOCK IN SHARE MODE
	}), &gorm.Config{
		DisableAutomaticPing: true,
		Logger:               logger.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("connect: mysql: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(50)
	sqlDB.SetMaxIdleConns(50)
	sqlDB.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// PingRedis is a readiness check for rdb.
func PingRedis(rdb redis.UniversalClient) func(context.Context) error {
	return func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
}

// PingMySQL is a readiness check for db.
func PingMySQL(db *gorm.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		return sqlDB.PingContext(ctx)
	}
}

// Conns are the two connections every flashsale process holds.
type Conns struct {
	Redis redis.UniversalClient
	DB    *gorm.DB
}

// Open opens both connections (without dialing; see Redis and MySQL).
func Open(redisURL string, mode RedisMode, mysqlDSN string) (*Conns, error) {
	rdb, err := Redis(redisURL, mode)
	if err != nil {
		return nil, err
	}
	db, err := MySQL(mysqlDSN)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &Conns{Redis: rdb, DB: db}, nil
}

// Checks are the readiness checks of both connections, by name.
func (c *Conns) Checks() map[string]health.Check {
	return map[string]health.Check{
		"redis": PingRedis(c.Redis),
		"mysql": PingMySQL(c.DB),
	}
}

// Close closes both connections.
func (c *Conns) Close() error {
	var errs []error
	if sqlDB, err := c.DB.DB(); err == nil {
		errs = append(errs, sqlDB.Close())
	}
	errs = append(errs, c.Redis.Close())
	return errors.Join(errs...)
}
