// Package tasks is the order domain's background work on asynq: the task
// types and their payloads, the durable Queue that puts tasks into Redis
// before it returns, the api's Relay that sends them in batches off the
// request path, the worker's handlers that run them (persisting orders and
// groups into MySQL, payment timeouts, settling groups), and the
// Reconciler that finds, in the activities' outboxes, whatever a lost task
// left behind.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/tracing"
)

// Task types and their queue.
const (
	TypeSync      = "order:sync"   // record an order's current state in MySQL
	TypeExpire    = "order:expire" // cancel an order whose payment time ran out
	TypeSettle    = "group:settle" // settle a group at its deadline
	TypeSyncGroup = "group:sync"   // record a group's current state in MySQL
	// The api's relay sends accepted orders' tasks in batches (Relay).
	TypeSyncBatch   = "order:sync-batch"   // record many orders in MySQL
	TypeExpireBatch = "order:expire-batch" // cancel many orders whose payment time ran out
	// QueueName is the asynq queue of every order task.
	QueueName = "orders"
)

type syncPayload struct {
	No    string `json:"no"`
	Fence int64  `json:"fence"`
	// Trace is the W3C traceparent of the request that made the order or
	// the change, when traced (internal/tracing): the worker's span links
	// to it, so an order is followed from its request to its MySQL write.
	Trace string `json:"tp,omitempty"`
}

// Durable is an order.Tasks whose every call has put its task into Redis
// when it returns nil: Queue. The worker's handlers and the reconciler
// take only a Durable, since a handler that queued a follow-up is done and
// its task deleted, and a follow-up that was only remembered in memory (the
// api's Relay) would die with the process.
type Durable interface {
	order.Tasks
	durable()
}

// Queue queues order tasks on asynq, durably.
type Queue struct{ c *asynq.Client }

var _ Durable = (*Queue)(nil)

// NewQueue returns a Queue on c.
func NewQueue(c *asynq.Client) *Queue { return &Queue{c: c} }

func (*Queue) durable() {}

// Sync queues the recording of order no. Its TaskID is the order number for
// the first persistence (asynq refuses a second one while the first exists)
// and order number plus fence for a status change.
func (t *Queue) Sync(ctx context.Context, no string, fence int64) error {
	id := no
	if fence != 0 {
		id = no + ":" + strconv.FormatInt(fence, 10)
	}
	payload, _ := json.Marshal(syncPayload{No: no, Fence: fence, Trace: tracing.Carrier(ctx)})
	return t.enqueue(ctx, asynq.NewTask(TypeSync, payload), asynq.TaskID(id))
}

// ExpireThenSync queues order no's payment timeout, then its first
// persistence (order.Tasks.ExpireThenSync).
func (t *Queue) ExpireThenSync(ctx context.Context, no string, payBy time.Time) error {
	if err := t.ExpireAt(ctx, no, payBy); err != nil {
		return err
	}
	return t.Sync(ctx, no, 0)
}

// ExpireAt queues the payment timeout of order no for at.
func (t *Queue) ExpireAt(ctx context.Context, no string, at time.Time) error {
	payload, _ := json.Marshal(syncPayload{No: no})
	return t.enqueue(ctx, asynq.NewTask(TypeExpire, payload), asynq.TaskID("expire:"+no), asynq.ProcessAt(at))
}

// batchPayload names many orders: sync batches carry fences, expiry
// batches only order numbers.
type batchPayload struct {
	Orders []syncPayload `json:"orders"`
}

// SyncBatch queues the recording of many orders as one task.
func (t *Queue) SyncBatch(ctx context.Context, orders []syncPayload) error {
	return t.enqueue(ctx, asynq.NewTask(TypeSyncBatch, appendBatchPayload(make([]byte, 0, 16+64*len(orders)), orders)))
}

// ExpireBatch queues the payment timeouts of many orders: one task per
// second in which some are due, at the end of that second (never early; at
// most a second late). A batch mixes sales, so one task for all, due when
// the last is, would let a 5-minute sale's unpaid orders hold stock as long
// as a 1-hour sale's.
func (t *Queue) ExpireBatch(ctx context.Context, items []relayItem) error {
	due := map[time.Time]*batchPayload{}
	var order []time.Time
	for _, it := range items {
		at := it.PayBy.Truncate(time.Second)
		if at.Before(it.PayBy) {
			at = at.Add(time.Second)
		}
		p := due[at]
		if p == nil {
			p = &batchPayload{}
			due[at] = p
			order = append(order, at)
		}
		p.Orders = append(p.Orders, syncPayload{No: it.No})
	}
	for _, at := range order {
		orders := due[at].Orders
		payload := appendBatchPayload(make([]byte, 0, 16+48*len(orders)), orders)
		if err := t.enqueue(ctx, asynq.NewTask(TypeExpireBatch, payload), asynq.ProcessAt(at)); err != nil {
			return err
		}
	}
	return nil
}

// SettleAt queues the settlement of group gid at its deadline.
func (t *Queue) SettleAt(ctx context.Context, gid string, at time.Time) error {
	payload, _ := json.Marshal(syncPayload{No: gid})
	return t.enqueue(ctx, asynq.NewTask(TypeSettle, payload), asynq.TaskID("settle:"+gid), asynq.ProcessAt(at))
}

// SyncGroup queues the recording of group gid. It is not deduplicated by
// TaskID: each change of the group queues one, and the task writes whatever
// the group is when it runs.
func (t *Queue) SyncGroup(ctx context.Context, gid string) error {
	payload, _ := json.Marshal(syncPayload{No: gid})
	return t.enqueue(ctx, asynq.NewTask(TypeSyncGroup, payload))
}

func (t *Queue) enqueue(ctx context.Context, task *asynq.Task, opts ...asynq.Option) error {
	opts = append(opts, asynq.Queue(QueueName), asynq.MaxRetry(maxRetry))
	_, err := t.c.EnqueueContext(ctx, task, opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // queued already
	}
	if err != nil {
		return fmt.Errorf("%w: enqueue %s: %w", order.ErrUnavailable, task.Type(), err)
	}
	return nil
}

// maxRetry is high on purpose: a sync that fails because MySQL is down must
// keep trying until it is back (with RetryDelay's capped backoff), or the
// order would be lost to MySQL. Failures that retrying cannot mend return
// asynq.SkipRetry and are archived, where an operator sees them.
const maxRetry = 100_000

// RetryDelay is the worker's backoff: doubling from 100ms, capped at 5s, so
// persistence resumes within seconds of MySQL coming back.
func RetryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	d := 100 * time.Millisecond << min(n, 6)
	return min(d, 5*time.Second)
}
