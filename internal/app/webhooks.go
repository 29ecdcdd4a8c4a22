package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/config"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/logging"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/tasks"
	"github.com/flashsale/flashsale/internal/webhook"
)

// openWebhooks builds the webhooks' record, queue and admin service on the
// stack: the api serves the endpoints' admin API with them, the worker
// dispatches and delivers (startWebhooks).
func (s *stack) openWebhooks() error {
	keys, err := WebhookSecretKeys(s.cfg)
	if err != nil {
		return err
	}
	if s.hooks, err = mysqlstore.NewWebhooksWithKeys(s.conns.DB, keys); err != nil {
		return err
	}
	s.hooks.SetCurrency(s.cfg.PaymentCurrency) // the orders' order.accepted, read from their rows
	if keys.Current == nil {
		warnPlainSecrets.Do(func() {
			s.log.Warn("webhooks: WEBHOOK_SECRET_KEY is not set: endpoints' secrets are stored unencrypted, " +
				"and a dump of the database can sign webhooks (docs/webhooks.md, Secrets at rest)")
		})
	}
	s.hookRedis, s.hookQueue = s.conns.Redis, tasks.NewWebhookQueue(s.tasks, s.conns.Redis)
	if s.cfg.WebhookRedisURL != "" {
		// A Redis of the deliveries' own (docs/webhooks.md): their tasks
		// and the repair's identity there, the dispatcher's lock with the
		// others.
		if s.hookRedis, err = connect.Redis(s.cfg.WebhookRedisURL, connect.RedisMode{}); err != nil {
			return fmt.Errorf("WEBHOOK_REDIS_URL: %w", err)
		}
		s.hookRedisOwn = true
		s.checks["redis_webhooks"] = connect.PingRedis(s.hookRedis)
		s.hookQueue = tasks.NewWebhookQueue(asynq.NewClientFromRedisClient(s.hookRedis), s.hookRedis)
	}
	s.hookSvc = webhook.NewService(s.hooks, s.hooks, s.hooks, s.hookQueue, webhook.ServiceConfig{
		Guard: webhook.Guard{AllowPrivate: s.cfg.WebhookAllowPrivate}, RotationWindow: s.cfg.WebhookRotationWindow,
		Retention: s.cfg.WebhookRetention,
	})
	return nil
}

// warnPlainSecrets says once a process that endpoints' secrets are stored
// as they are (embedded mode opens a stack for its api and its worker).
var warnPlainSecrets sync.Once

// WebhookSecretKeys are WEBHOOK_SECRET_KEY and WEBHOOK_SECRET_KEY_OLD,
// decoded (config checked them).
func WebhookSecretKeys(cfg config.Config) (mysqlstore.SecretKeys, error) {
	cur, err := mysqlstore.ParseSecretKey(cfg.WebhookSecretKey)
	if err != nil {
		return mysqlstore.SecretKeys{}, fmt.Errorf("WEBHOOK_SECRET_KEY: %w", err)
	}
	old, err := mysqlstore.ParseSecretKey(cfg.WebhookSecretKeyOld)
	if err != nil {
		return mysqlstore.SecretKeys{}, fmt.Errorf("WEBHOOK_SECRET_KEY_OLD: %w", err)
	}
	return mysqlstore.SecretKeys{Current: cur, Old: old}, nil
}

// webhookSchedule is WEBHOOK_RETRY_SCHEDULE.
func (s *stack) webhookSchedule() webhook.Schedule {
	return webhook.Schedule(s.cfg.WebhookRetrySchedule)
}

// startWebhooks starts the worker's webhook deliveries: a task server of
// their own, on their own queue (WEBHOOK_CONCURRENCY; an order task never
// waits for a slow endpoint), and the dispatcher, which one worker at a
// time runs (its lock), until ctx ends.
func (m *Worker) startWebhooks(ctx context.Context) error {
	s, cfg := m.stack, m.Config
	metrics := tasks.NewWebhookMetrics(s.reg, s.hooks.CountUndispatched, s.hooks.OldestUndispatched, s.hooks.CountDisabledFailing)
	sender := webhook.NewSender(webhook.SenderConfig{Timeout: cfg.WebhookTimeout,
		Guard: webhook.Guard{AllowPrivate: cfg.WebhookAllowPrivate}})
	deliverer := webhook.NewDeliverer(s.hooks, s.hooks, sender, webhook.DelivererConfig{
		Schedule: s.webhookSchedule(), EndpointConcurrency: cfg.WebhookEndpointConcurrency,
		Observe: metrics.Observe, Log: m.Logger,
	})
	m.hookTasks = asynq.NewServerFromRedisClient(s.hookRedis, asynq.Config{
		Concurrency:    cfg.WebhookConcurrency,
		Queues:         map[string]int{tasks.WebhookQueueName: 1},
		IsFailure:      tasks.WebhookIsFailure,
		RetryDelayFunc: tasks.WebhookRetryDelay,
		// Retries (the schedule's first is 5 s) and deliveries sent back
		// for their endpoint's turn come back within 200 ms of their time,
		// and a new delivery is taken within 200 ms on an idle queue, not
		// asynq's 5 s and 1 s.
		DelayedTaskCheckInterval: 200 * time.Millisecond,
		TaskCheckInterval:        200 * time.Millisecond,
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			var busy *webhook.Busy
			if !errors.As(err, &busy) { // turned away: its endpoint's turn comes
				m.Logger.Warn("webhook delivery task failed; will retry", "type", t.Type(), "err", err)
			}
		}),
		Logger:          logging.Asynq{Log: m.Logger},
		ShutdownTimeout: cfg.ShutdownTimeout,
	})
	mux := asynq.NewServeMux()
	tasks.NewWebhookWorker(deliverer, s.hookQueue).Register(mux)
	if err := m.hookTasks.Start(mux); err != nil {
		return err
	}
	d := webhook.NewDispatcher(s.hooks, s.hooks, s.hookQueue)
	run := tasks.NewWebhookDispatcher(s.locks, d, webhook.NewRetention(s.hooks, cfg.WebhookRetention),
		cfg.WebhookDispatchInterval, m.Logger)
	run.Repairs(webhook.NewRepairer(s.hooks, s.hooks, s.hooks, s.hookQueue, s.hookQueue),
		tasks.RedisIdentity(s.hookRedis, tasks.WebhookQueueName), cfg.WebhookRepairWindow)
	m.hookDone = make(chan struct{})
	go func() { defer close(m.hookDone); run.Run(ctx) }()
	return nil
}
