package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
)

// Payments keeps the live record of orders' payments in Redis, beside the
// orders (payment.Store): one field per order in its sale's payments hash,
// kept as long as the sale, and the webhook events handled.
type Payments struct {
	rdb  redis.UniversalClient
	pipe *redispipe.Pipe // nil: each call its own round trip
}

var _ payment.Store = Payments{}

// NewPayments returns the payments' store on rdb, each call a round trip
// of its own.
func NewPayments(rdb redis.UniversalClient) Payments { return Payments{rdb: rdb} }

// Payments returns the payments' store beside these orders: its scripts go
// through the orders' pipe, batched with every other caller's, and a
// payment's save is acknowledged by the replicas as the order's changes are
// (Config.Ack) — the money recorded before the order is paid stays
// recorded through a failover that keeps the pay. Close the orders' store
// last.
func (s *Orders) Payments() Payments { return Payments{rdb: s.rdb, pipe: s.pipe} }

// run runs script through the pipe when there is one.
func (s Payments) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.pipe == nil {
		return script.Run(ctx, s.rdb, keys, args...)
	}
	return s.pipe.Run(ctx, script, keys, args...)
}

var savePaymentScript = Lua.Script("save_payment")

// paymentJSON is a payment as the payments hash holds it (save_payment.lua
// merges it field by field).
type paymentJSON struct {
	ID           string `json:"id"`
	Provider     string `json:"provider"`
	OrderNo      string `json:"order_no"`
	ActivityID   int64  `json:"activity_id"`
	AmountCents  int64  `json:"amount_cents"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ClientSecret string `json:"client_secret"`
	Flag         string `json:"flag"`
	RefundID     string `json:"refund_id"`
	CreatedMS    int64  `json:"created_ms"`
	UpdatedMS    int64  `json:"updated_ms"`
}

func toJSON(p payment.Payment) paymentJSON {
	return paymentJSON{
		ID: p.ID, Provider: p.Provider, OrderNo: p.OrderNo, ActivityID: p.ActivityID, AmountCents: p.AmountCents,
		Currency: p.Currency, Status: string(p.Status), ClientSecret: p.ClientSecret, Flag: string(p.Flag),
		RefundID: p.RefundID, CreatedMS: p.CreatedAt.UnixMilli(), UpdatedMS: p.UpdatedAt.UnixMilli(),
	}
}

func (j paymentJSON) payment() payment.Payment {
	return payment.Payment{
		ID: j.ID, Provider: j.Provider, OrderNo: j.OrderNo, ActivityID: j.ActivityID, AmountCents: j.AmountCents,
		Currency: j.Currency, Status: payment.Status(j.Status), ClientSecret: j.ClientSecret, Flag: payment.Flag(j.Flag),
		RefundID: j.RefundID, CreatedAt: time.UnixMilli(j.CreatedMS).UTC(), UpdatedAt: time.UnixMilli(j.UpdatedMS).UTC(),
	}
}

func decodePayment(s string) (payment.Payment, error) {
	var j paymentJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return payment.Payment{}, fmt.Errorf("%w: a payment record: %w", payment.ErrUnavailable, err)
	}
	return j.payment(), nil
}

// Payment returns order no's payment, or payment.ErrNotFound.
func (s Payments) Payment(ctx context.Context, no string) (payment.Payment, error) {
	k, err := noKeys(no)
	if err != nil {
		return payment.Payment{}, err
	}
	var v string
	if s.pipe == nil {
		v, err = s.rdb.HGet(ctx, k.Payments, no).Result()
	} else {
		v, err = s.pipe.RunRead(ctx, readPayScript, []string{k.Payments}, no).Text()
	}
	if errors.Is(err, redis.Nil) {
		return payment.Payment{}, fmt.Errorf("%w: order %s", payment.ErrNotFound, no)
	}
	if err != nil {
		return payment.Payment{}, fmt.Errorf("%w: payment: %w", payment.ErrUnavailable, err)
	}
	return decodePayment(v)
}

// SavePayment records p merged with what is recorded (save_payment.lua).
func (s Payments) SavePayment(ctx context.Context, p payment.Payment) (payment.Payment, error) {
	k, err := noKeys(p.OrderNo)
	if err != nil {
		return payment.Payment{}, err
	}
	b, err := json.Marshal(toJSON(p))
	if err != nil {
		return payment.Payment{}, err
	}
	v, err := s.run(ctx, savePaymentScript, []string{k.Meta, k.Payments, k.Orders}, p.OrderNo, string(b)).Text()
	if err != nil {
		return payment.Payment{}, fmt.Errorf("%w: save payment: %w", payment.ErrUnavailable, err)
	}
	return decodePayment(v)
}

// eventKept is how long a handled event is remembered: providers retry
// for three days (Stripe), and a week covers them.
const eventKept = 7 * 24 * time.Hour

// EventSeen reports whether provider's event id was handled.
func (s Payments) EventSeen(ctx context.Context, provider, id string) (bool, error) {
	n, err := s.rdb.Exists(ctx, rediskeys.WebhookEvent(provider, id)).Result()
	if err != nil {
		return false, fmt.Errorf("%w: event: %w", payment.ErrUnavailable, err)
	}
	return n == 1, nil
}

// MarkSeen remembers that provider's event id was handled.
func (s Payments) MarkSeen(ctx context.Context, provider, id string) error {
	if err := s.rdb.Set(ctx, rediskeys.WebhookEvent(provider, id), 1, eventKept).Err(); err != nil {
		return fmt.Errorf("%w: event: %w", payment.ErrUnavailable, err)
	}
	return nil
}
