// Package connect opens the service's Redis and MySQL connections from the
// configured URL and DSN, with the options every caller needs.
package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/flashsale/flashsale/internal/health"
)

// Redis returns a client for a redis:// or rediss:// URL, or with cluster a
// Redis Cluster client for redis://host1:port1?addr=host2:port2&… (the seed
// nodes; the client learns the rest). It does not dial: the service starts
// while Redis is down and reports it on /readyz.
//
// Everything flashsale keeps in Redis works on a cluster because every
// multi-key script and transaction touches one hash slot: an activity's keys
// share {act:<id>}, a lock's share {<name>}, and asynq's share {<queue>}.
func Redis(url string, cluster bool) (redis.UniversalClient, error) {
	if cluster {
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
	// stalled server holds a request for ReadTimeout (3s) whatever its context.
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
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
func Open(redisURL string, redisCluster bool, mysqlDSN string) (*Conns, error) {
	rdb, err := Redis(redisURL, redisCluster)
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
