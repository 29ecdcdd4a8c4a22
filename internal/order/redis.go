package order

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/redisbatch"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func source(name string) string {
	b, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("order: missing embedded script " + name) // a build mistake, caught by every test
	}
	return string(b)
}

var (
	orderLib         = stock.SaleLib + source("lib_order")
	acceptScript     = redis.NewScript(orderLib + source("accept"))
	openGroupScript  = redis.NewScript(orderLib + source("open_group"))
	joinGroupScript  = redis.NewScript(orderLib + source("join_group"))
	settleScript     = redis.NewScript(source("settle_group"))
	transitionScript = redis.NewScript(stock.SaleLib + source("transition"))
	persistedScript  = redis.NewScript(source("persisted"))
)

// Redis keeps orders in Redis, next to their activity's stock.
type Redis struct {
	rdb       redis.UniversalClient
	idemTTL   time.Duration
	retention time.Duration
	// batch pipelines concurrent accept scripts together: one socket write
	// and read for many orders, in the api and in Redis. Measured with
	// `make bench-strategy`: docs/benchmarks.md.
	batch *redisbatch.Batcher
}

// NewRedis returns the store. Idempotency keys are remembered for idemTTL,
// order records kept for retention (both well past payment and persistence).
// Close it to stop its batcher.
func NewRedis(rdb redis.UniversalClient, idemTTL, retention time.Duration) *Redis {
	return &Redis{rdb: rdb, idemTTL: idemTTL, retention: retention, batch: redisbatch.New(rdb)}
}

// Close stops the store's batcher; later calls go to Redis one by one.
func (s *Redis) Close() { s.batch.Close() }

// accepted is what Accept reports.
type accepted struct {
	order     Order
	replay    bool  // an earlier request with the same Idempotency-Key made it
	remaining int64 // units left in the sale
}

// Accept runs the accept script for a new order numbered no.
func (s *Redis) Accept(ctx context.Context, no string, activityID, userID int64, qty int, idemKey string) (accepted, error) {
	k := rediskeys.For(activityID)
	hasKey, idem := "0", k.Idempotency(userID, "-")
	if idemKey != "" {
		hasKey, idem = "1", k.Idempotency(userID, idemKey)
	}
	res, err := s.batch.Run(ctx, acceptScript, []string{k.Meta, k.Stock, k.Users, k.Order(no), idem, k.Outbox},
		userID, qty, no, hasKey, s.idemTTL.Milliseconds(), s.retention.Milliseconds()).Slice()
	if err != nil {
		return accepted{}, fmt.Errorf("%w: accept: %w", ErrUnavailable, err)
	}
	if len(res) != 7 {
		return accepted{}, fmt.Errorf("order: accept script returned %v", res)
	}
	code, _ := res[0].(int64)
	num := func(i int) int64 { n, _ := res[i].(int64); return n }
	switch code {
	case 0:
		return accepted{
			order: Order{
				No: no, ActivityID: activityID, UserID: userID, Quantity: qty,
				PriceCents: num(6), AmountCents: num(6) * int64(qty), Status: PendingPayment,
				CreatedAt: time.UnixMilli(num(4)).UTC(), PayBy: time.UnixMilli(num(5)).UTC(),
			},
			remaining: num(2),
		}, nil
	case 7:
		existing, _ := res[1].(string)
		o, err := s.Get(ctx, existing)
		return accepted{order: o, replay: true}, err
	case 8:
		return accepted{}, fmt.Errorf("%w: a group buy's orders are placed by opening or joining a group", ErrWrongType)
	}
	return accepted{remaining: num(2)}, saleRefusal(code)
}

// saleRefusal maps lib_sale's codes to the activity errors.
func saleRefusal(code int64) error {
	switch code {
	case 1:
		return activity.ErrNotOnSale
	case 2:
		return activity.ErrNotStarted
	case 3:
		return activity.ErrEnded
	case 4:
		return activity.ErrLimitExceeded
	case 5:
		return activity.ErrSoldOut
	}
	return fmt.Errorf("order: accept script returned code %d", code)
}

// Get reads order no from Redis, or ErrNotFound.
func (s *Redis) Get(ctx context.Context, no string) (Order, error) {
	act, err := ParseNo(no)
	if err != nil {
		return Order{}, err
	}
	m, err := s.rdb.HGetAll(ctx, rediskeys.For(act).Order(no)).Result()
	if err != nil {
		return Order{}, fmt.Errorf("%w: get: %w", ErrUnavailable, err)
	}
	if len(m) == 0 {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, no)
	}
	return parseOrder(no, act, m), nil
}

// parseOrder reads an order record's fields.
func parseOrder(no string, act int64, m map[string]string) Order {
	num := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	at := func(f string) time.Time {
		if m[f] == "" {
			return time.Time{}
		}
		return time.UnixMilli(num(f)).UTC()
	}
	cancelled := at("cancelled_ms")
	if cancelled.IsZero() {
		cancelled = at("refunded_ms") // a refund ends an order too
	}
	return Order{
		No: no, ActivityID: act, UserID: num("user"), Quantity: int(num("qty")), PriceCents: num("price"),
		AmountCents: num("amount"), Status: Status(m["status"]), Fence: num("fence"),
		CreatedAt: at("created_ms"), PayBy: at("pay_by_ms"), PaidAt: at("paid_ms"), CancelledAt: cancelled,
		Persisted: m["persisted"] == "1", GroupID: m["group"],
	}
}

// GetMany reads orders nos from Redis in one pipeline. Orders whose record
// is gone are left out and named in missing.
func (s *Redis) GetMany(ctx context.Context, nos []string) (found []Order, missing []string, err error) {
	acts := make([]int64, len(nos))
	cmds := make([]*redis.MapStringStringCmd, len(nos))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, no := range nos {
			var err error
			if acts[i], err = ParseNo(no); err != nil {
				return err
			}
			cmds[i] = p.HGetAll(ctx, rediskeys.For(acts[i]).Order(no))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: get: %w", ErrUnavailable, err)
	}
	for i, no := range nos {
		if m := cmds[i].Val(); len(m) > 0 {
			found = append(found, parseOrder(no, acts[i], m))
		} else {
			missing = append(missing, no)
		}
	}
	return found, missing, nil
}

// Transition codes of transition.lua.
const (
	transDone     = 0
	transNotFound = 1
	transNotOpen  = 2
	transOverdue  = 3
	transNotDue   = 4
	transStale    = 5
	transNotFail  = 6
	transClosed   = 7
)

// Transition runs transition.lua on order no of group groupID ("" for none):
// what is pay, cancel, expire, refund or settle; userID 0 is the system.
func (s *Redis) Transition(ctx context.Context, no, groupID, what string, fence, userID int64) (code int64, status Status, err error) {
	act, err := ParseNo(no)
	if err != nil {
		return 0, "", err
	}
	k := rediskeys.For(act)
	user := ""
	if userID != 0 {
		user = strconv.FormatInt(userID, 10)
	}
	gid := groupID
	if gid == "" {
		gid = "-" // keys must be named (and in the slot) even when unused
	}
	res, err := transitionScript.Run(ctx, s.rdb,
		[]string{k.Meta, k.Stock, k.Users, k.Order(no), k.Group(gid), k.GroupMembers(gid), k.Forming(), k.Outbox},
		what, fence, k.Restock, user, groupID, no).Slice()
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	if len(res) != 3 {
		return 0, "", fmt.Errorf("order: transition script returned %v", res)
	}
	code, _ = res[0].(int64)
	st, _ := res[1].(string)
	return code, Status(st), nil
}

// MarkPersisted notes that o, as read from Redis, is in MySQL, and takes it
// off the outbox unless it has changed since (persisted.lua).
func (s *Redis) MarkPersisted(ctx context.Context, o Order) error {
	return s.MarkPersistedMany(ctx, []Order{o})
}

// MarkPersistedMany is MarkPersisted for many orders, in one pipeline.
func (s *Redis) MarkPersistedMany(ctx context.Context, orders []Order) error {
	run := func(eval func(p redis.Pipeliner, keys []string, fence int64) *redis.Cmd) error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, o := range orders {
				act, err := ParseNo(o.No)
				if err != nil {
					return err
				}
				k := rediskeys.For(act)
				eval(p, []string{k.Order(o.No), k.Outbox}, o.Fence)
			}
			return nil
		})
		return err
	}
	err := run(func(p redis.Pipeliner, keys []string, fence int64) *redis.Cmd {
		return persistedScript.EvalSha(ctx, p, keys, fence)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A pipeline cannot fall back script by script: send the source.
		err = run(func(p redis.Pipeliner, keys []string, fence int64) *redis.Cmd {
			return persistedScript.Eval(ctx, p, keys, fence)
		})
	}
	if err != nil {
		return fmt.Errorf("%w: mark persisted: %w", ErrUnavailable, err)
	}
	return nil
}

// outboxEntry is an order whose latest state is not yet recorded in MySQL:
// just accepted, or changed (paid, cancelled, ...) since it was recorded.
type outboxEntry struct {
	ID    string // the stream entry's
	No    string
	Since time.Time // Redis time of the acceptance or change, from the stream entry's id
}

// Unpersisted returns up to max orders that have waited in activity id's
// outbox for longer than grace: accepted or changed, not yet in MySQL.
func (s *Redis) Unpersisted(ctx context.Context, id int64, grace time.Duration, max int64) ([]outboxEntry, error) {
	until := strconv.FormatInt(time.Now().Add(-grace).UnixMilli(), 10)
	entries, err := s.rdb.XRangeN(ctx, rediskeys.For(id).Outbox, "-", until, max).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: outbox: %w", ErrUnavailable, err)
	}
	out := make([]outboxEntry, 0, len(entries))
	for _, e := range entries {
		no, ok := e.Values["o"].(string)
		if !ok {
			continue
		}
		ms, _ := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
		out = append(out, outboxEntry{ID: e.ID, No: no, Since: time.UnixMilli(ms)})
	}
	return out, nil
}

// dropOutboxEntry deletes entry id of activity act's outbox: its order
// record is gone (kept for the retention period, which ran out), so there
// is nothing left to write.
func (s *Redis) dropOutboxEntry(ctx context.Context, act int64, id string) error {
	if err := s.rdb.XDel(ctx, rediskeys.For(act).Outbox, id).Err(); err != nil {
		return fmt.Errorf("%w: outbox: %w", ErrUnavailable, err)
	}
	return nil
}
