package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Failures retrying cannot mend are not retried: asynq archives them.
func TestWorker_permanentFailures_skipRetry(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	store := ordertest.On(t, rdb).Store
	w := NewWorker(DurableService{}, store, &recorded{}, &recorded{}, ordertest.Log())
	for name, payload := range map[string]string{
		"not JSON":           `{`,
		"bad order number":   `{"no":"nope"}`,
		"record gone":        `{"no":"` + order.NewNo(5) + `"}`,
		"missing the number": `{}`,
	} {
		err := w.HandleSync(context.Background(), asynq.NewTask(TypeSync, []byte(payload)))
		if !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: %v, want SkipRetry", name, err)
		}
	}
}

// An expiry batch in which some orders fail (here: one not due yet) expires
// the rest, queues the failed one again on its own and is done; a batch in
// which all fail is retried whole.
func TestWorker_expireBatch_requeuesOnlyTheFailedOrders(t *testing.T) {
	sh := ordertest.New(t,
		activity.Activity{ID: 13, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1, PaymentTTL: 100 * time.Millisecond},
		activity.Activity{ID: 14, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1}) // a minute to pay
	ctx, store := context.Background(), sh.Store
	svc := sh.Service(&recorded{})
	var nos []string
	for i, act := range []int64{13, 13, 13, 14} {
		o, err := svc.Place(ctx, order.PlaceRequest{ActivityID: act, UserID: int64(i + 1), Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		nos = append(nos, o.No)
	}
	time.Sleep(300 * time.Millisecond)
	requeue := &recorded{}
	w := NewWorker(NewDurableService(sh.Deps(nil), order.Config{}, requeue), store, &recorded{}, requeue, ordertest.Log())
	task := func(nos ...string) *asynq.Task {
		var p batchPayload
		for _, no := range nos {
			p.Orders = append(p.Orders, syncPayload{No: no})
		}
		raw, _ := json.Marshal(p)
		return asynq.NewTask(TypeExpireBatch, raw)
	}

	if err := w.HandleExpireBatch(ctx, task(nos...)); err != nil {
		t.Fatalf("a batch with one order not due: %v, want done", err)
	}
	for i, no := range nos {
		o, _ := store.Get(ctx, no)
		if want := map[bool]order.Status{true: order.Cancelled, false: order.PendingPayment}[i < 3]; o.Status != want {
			t.Errorf("order %d (%s): %s, want %s", i, no, o.Status, want)
		}
	}
	if fmt.Sprint(requeue.expires) != fmt.Sprint(nos[3:]) {
		t.Fatalf("queued again %v, want only the order not due %v", requeue.expires, nos[3:])
	}

	if err := w.HandleExpireBatch(ctx, task(nos[3])); !errors.Is(err, order.ErrNotDue) {
		t.Fatalf("a batch whose every order fails: %v, want ErrNotDue (retried whole)", err)
	}
	if len(requeue.expires) != 1 {
		t.Fatalf("queued again %v after a batch that failed whole", requeue.expires)
	}
}

// The Service the worker expires and settles with queues its follow-ups
// (here an expired order's sync) on the Durable it was made with, never on
// the Tasks its Deps named: a handler's follow-up must be in Redis before
// the handler is done.
func TestNewDurableService_followUpsGoToTheDurableQueue(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 15, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1, PaymentTTL: 100 * time.Millisecond})
	ctx := context.Background()
	o, err := sh.Service(ordertest.NoTasks{}).Place(ctx, order.PlaceRequest{ActivityID: 15, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past its payment time
	inMemory, durable := &notDurable{}, &recorded{}
	w := NewWorker(NewDurableService(sh.Deps(inMemory), order.Config{}, durable), sh.Store, &recorded{}, durable, ordertest.Log())
	raw, _ := json.Marshal(syncPayload{No: o.No})
	if err := w.HandleExpire(ctx, asynq.NewTask(TypeExpire, raw)); err != nil {
		t.Fatal(err)
	}
	if got, _ := sh.Store.Get(ctx, o.No); got.Status != order.Cancelled {
		t.Fatalf("order %s after its expiry: %s", o.No, got.Status)
	}
	if fmt.Sprint(durable.syncs) != fmt.Sprint([]string{o.No}) || inMemory.calls != 0 {
		t.Fatalf("the expiry's sync: durable queue %v, the Deps' Tasks %d calls; want [%s] and 0", durable.syncs, inMemory.calls, o.No)
	}
}

// notDurable is an order.Tasks that is not a Durable, like the api's Relay:
// it counts its calls.
type notDurable struct {
	ordertest.NoTasks
	calls int
}

func (n *notDurable) Sync(context.Context, string, int64) error { n.calls++; return nil }
