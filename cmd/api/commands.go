package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/internal/auth"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/health"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/migrations"
)

const usage = `usage:
  api                                serve the API
  api migrate up                     apply every pending migration
  api migrate down                   roll back the most recent migration
  api migrate status                 print the schema version
  api upgrade-redis                  move Redis data of a version before 2026-11-24 into today's
                                     form (stop older apis and workers first; docs/upgrading.md)
  api encrypt-webhook-secrets        seal every webhook endpoint's secret under WEBHOOK_SECRET_KEY: those
                                     stored before the key was set, and those under WEBHOOK_SECRET_KEY_OLD
                                     during a key rotation (docs/webhooks.md, Secrets at rest)
  api token --user 42 [--ttl 24h]    print a shopper's token (JWT_SECRET)
  api token --users N [--from 1] [--ttl 24h]
                                     print N lines "user_id<TAB>token", for load tests
  api healthcheck [--url URL]        GET /healthz on HTTP_ADDR (or URL) within 2 s: exit 0 on
                                     200, else 1 (the container health check; no curl needed)
  api scripts [NAME ...]             print every Lua script the service loads into Redis (or those
                                     named, e.g. place), whole, as Redis runs it; --write DIR writes
                                     them to DIR (docs/scripts holds them, kept current by a test)
  api webhook --order NO [--provider stripe|simulated] [--payment ID] [--amount CENTS]
              [--currency CODE] [--event ID] [--url URL] [--secret SECRET]
                                     send the api a signed payment_intent.succeeded for the order,
                                     as Stripe would (stripe-mock sends none): its payment and amount
                                     from GET /admin/v1/orders/NO (ADMIN_TOKEN) unless given, the
                                     secret STRIPE_WEBHOOK_SECRET's; print the answer
                                     (docs/payments.md, Try it locally)`

// command runs a subcommand.
func command(args []string) error {
	switch args[0] {
	case "migrate":
		return migrate(args[1:])
	case "token":
		return token(args[1:])
	case "upgrade-redis":
		return upgradeRedis(args[1:])
	case "encrypt-webhook-secrets":
		return encryptWebhookSecrets(args[1:])
	case "healthcheck":
		return healthcheck(args[1:])
	case "scripts":
		return scripts(args[1:], os.Stdout)
	case "webhook":
		return runWebhook(args[1:], os.Stdout)
	case "help", "-h", "--help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// exitCode is the process status for a command's error: 1 for a webhook
// not taken, else health.ExitCode's (1 unhealthy, 2 a misuse or another
// error).
func exitCode(err error) int {
	if errors.As(err, new(notTaken)) {
		return 1
	}
	return health.ExitCode(err)
}

func upgradeRedis(args []string) error {
	if len(args) != 0 {
		return errors.New(usage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.RedisURL == "" {
		return errors.New("upgrade-redis needs REDIS_URL")
	}
	rdb, err := connect.Redis(cfg.RedisURL, connect.RedisMode{Cluster: cfg.RedisCluster, SentinelMaster: cfg.RedisSentinelMaster})
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	u, err := redisstore.Upgrade(ctx, rdb, logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat))
	if err != nil {
		return err
	}
	fmt.Printf("upgraded %d sales: %d orders, %d outboxes, %d Idempotency-Keys moved\n", u.Sales, u.Orders, u.Outboxes, u.Keys)
	return nil
}

func encryptWebhookSecrets(args []string) error {
	if len(args) != 0 {
		return errors.New(usage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" || cfg.WebhookSecretKey == "" {
		return errors.New("encrypt-webhook-secrets needs MYSQL_DSN and WEBHOOK_SECRET_KEY (and WEBHOOK_SECRET_KEY_OLD during a key rotation)")
	}
	keys, err := app.WebhookSecretKeys(cfg)
	if err != nil {
		return err
	}
	db, err := connect.MySQL(cfg.MySQLDSN)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	hooks, err := mysqlstore.NewWebhooksWithKeys(db, keys)
	if err != nil {
		return err
	}
	defer hooks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := hooks.ReencryptSecrets(ctx)
	if err != nil {
		return fmt.Errorf("sealed %d endpoints' secrets, then: %w", n, err)
	}
	fmt.Printf("sealed %d endpoints' secrets under WEBHOOK_SECRET_KEY (the others were already)\n", n)
	return nil
}

func migrate(args []string) error {
	if len(args) != 1 {
		return errors.New(usage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" {
		return errors.New("migrate needs MYSQL_DSN")
	}
	db, err := connect.MySQL(cfg.MySQLDSN)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	switch args[0] {
	case "up":
		err = migrations.Up(ctx, sqlDB, log)
	case "down":
		err = migrations.Down(ctx, sqlDB, log)
	case "status":
	default:
		return fmt.Errorf("unknown migrate command %q\n%s", args[0], usage)
	}
	if err != nil {
		return err
	}
	v, err := migrations.Version(ctx, sqlDB)
	if err != nil {
		return err
	}
	fmt.Printf("schema version %d\n", v)
	return nil
}

func token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.Int64("user", 0, "the user id of one token")
	users := fs.Int("users", 0, "how many users' tokens to print, one per line")
	from := fs.Int64("from", 1, "the first user id with --users")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the tokens are valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	tokens, err := auth.New(cfg.JWTSecret)
	if err != nil {
		return err
	}
	switch {
	case *user > 0 && *users == 0:
		t, err := tokens.Issue(*user, *ttl)
		if err != nil {
			return err
		}
		fmt.Println(t)
	case *users > 0 && *user == 0 && *from > 0:
		w := bufio.NewWriter(os.Stdout)
		defer w.Flush()
		for id := *from; id < *from+int64(*users); id++ {
			t, err := tokens.Issue(id, *ttl)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%d\t%s\n", id, t)
		}
	default:
		return errors.New("give --user ID, or --users N (with --from ID)\n" + usage)
	}
	return nil
}
