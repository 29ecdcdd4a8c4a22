package payment_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// The money review of 2026-11-28 (issue 38): each test here failed on the
// code before it, against a real redis-server.

// heldOrders is the order domain with a hook: ConfirmPaid of a payment in
// hold waits until its channel is closed, and Get fails with ErrUnavailable
// once failGet is set (a Redis blip).
type heldOrders struct {
	payment.Orders
	mu      sync.Mutex
	hold    map[string]chan struct{} // payment id → released when closed
	reached map[string]chan struct{} // payment id → closed when its Pay is held
	failGet bool
}

func (h *heldOrders) holdPayment(id string) (reached <-chan struct{}, release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hold == nil {
		h.hold, h.reached = map[string]chan struct{}{}, map[string]chan struct{}{}
	}
	h.hold[id], h.reached[id] = make(chan struct{}), make(chan struct{})
	return h.reached[id], func() { close(h.hold[id]) }
}

func (h *heldOrders) Pay(ctx context.Context, held order.Order, paymentID string) (order.Order, error) {
	h.mu.Lock()
	wait, reached := h.hold[paymentID], h.reached[paymentID]
	h.mu.Unlock()
	if wait != nil {
		close(reached)
		<-wait
	}
	o, err := h.Orders.Pay(ctx, held, paymentID)
	if err != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.failGet {
			h.failGet = false // the blip: the next Get, the re-read after the refusal
			h.Orders = failingGets{h.Orders}
		}
	}
	return o, err
}

// failingGets answers Get with ErrUnavailable.
type failingGets struct{ payment.Orders }

func (failingGets) Get(context.Context, string, int64) (order.Order, error) {
	return order.Order{}, fmt.Errorf("%w: redis: i/o timeout", order.ErrUnavailable)
}

func (e *env) store() payment.Store { return redisstore.NewPayments(e.sh.RDB) }

func (e *env) hooked() *heldOrders {
	h := &heldOrders{Orders: e.orders}
	e.pay.UseOrders(h)
	return h
}

// Two payments of one order, A and B (two apis with different secrets,
// say): A's money is recorded, and its ConfirmPaid held back, while B's
// webhook pays the order; then A's goes on, and is a duplicate. The live
// record names B, the payment that paid. When the group then fails, the
// provider refunds B (the money that paid) and A (the duplicate), each
// once. Before, the record kept A, the failed group refunded A (twice
// over, under one key: once) and B never.
func TestService_twoPaymentsRace_recordNamesThePayer_aFailedGroupRefundsEach(t *testing.T) {
	e := newEnv(t, groupBuy)
	h := e.hooked()
	ctx := context.Background()
	g, o, err := e.orders.OpenGroup(ctx, order.PlaceRequest{ActivityID: 52, UserID: 1, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	reached, release := h.holdPayment("pi_A")
	aDone := make(chan error, 1)
	go func() { aDone <- e.succeeded(t, "evt_A", "pi_A", o.No, o.AmountCents) }()
	<-reached // A's money is recorded; its ConfirmPaid waits
	if err := e.succeeded(t, "evt_B", "pi_B", o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	paid, err := e.orders.Get(ctx, o.No, 0)
	if err != nil || paid.Status != order.Paid || paid.PaymentID != "pi_B" {
		t.Fatalf("the order: %+v, %v; want paid by pi_B", paid, err)
	}
	if rec := e.recorded(t, o.No); rec.ID != "pi_B" || rec.Flag != "" || rec.Status != payment.Succeeded {
		t.Fatalf("the live record: %+v; want pi_B, the payment that paid the order", rec)
	}
	if e.tasks.refundsOf("pi_A") != 1 || e.tasks.refundsOf("pi_B") != 0 {
		t.Fatalf("refunds queued: A %d, B %d; want A once (a duplicate), B none", e.tasks.refundsOf("pi_A"), e.tasks.refundsOf("pi_B"))
	}

	time.Sleep(groupBuy.GroupTTL + 100*time.Millisecond)
	if err := e.orders.Settle(ctx, g.ID); err != nil { // one member of two: the group fails
		t.Fatal(err)
	}
	refunded, err := e.orders.Get(ctx, o.No, 0)
	if err != nil || refunded.Status != order.Refunded {
		t.Fatalf("the failed group's paid order: %+v, %v; want refunded", refunded, err)
	}
	if err := e.pay.Settle(ctx, refunded); err != nil { // the worker's backstop, on the order's sync
		t.Fatal(err)
	}
	e.runRefunds(t)
	for _, id := range []string{"pi_A", "pi_B"} {
		if n := e.refundsAt(t, id); n != 1 {
			t.Errorf("payment %s: %d refunds at the provider, want 1", id, n)
		}
	}
	if rec := e.recorded(t, o.No); rec.ID != "pi_B" || !rec.Refunded() {
		t.Errorf("the live record after the refunds: %+v; want pi_B, refunded", rec)
	}
}

var many = activity.Activity{ID: 53, Type: activity.Seckill, TotalStock: 200, PerUserLimit: 1}

// Two webhooks of two payments of one order sent at once, no hook, for 200
// orders: every order ends paid by one of them, its live record names
// that one, and the other, only the other, is refunded. Before, 21 of 200
// records named the payment that did not pay the order.
func TestService_twoWebhooksAtOnce_everyRecordNamesThePayer(t *testing.T) {
	e := newEnv(t, many)
	ctx := context.Background()
	orders := make([]order.Order, 200)
	for i := range orders {
		orders[i] = e.place(t, 53, int64(i+1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(orders))
	for i, o := range orders {
		for _, x := range []string{"A", "B"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- e.succeeded(t, fmt.Sprintf("evt_%s_%d", x, i), fmt.Sprintf("pi_%s_%d", x, i), o.No, o.AmountCents)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wrong := 0
	for i, o := range orders {
		got, err := e.orders.Get(ctx, o.No, 0)
		if err != nil || got.Status != order.Paid {
			t.Fatalf("order %d: %+v, %v; want paid", i, got, err)
		}
		other := fmt.Sprintf("pi_A_%d", i)
		if got.PaymentID == other {
			other = fmt.Sprintf("pi_B_%d", i)
		}
		if rec := e.recorded(t, o.No); rec.ID != got.PaymentID || rec.Flag != "" {
			if wrong++; wrong <= 3 {
				t.Errorf("order %d: paid by %s, its live record %+v", i, got.PaymentID, rec)
			}
		}
		if e.tasks.refundsOf(got.PaymentID) != 0 || e.tasks.refundsOf(other) != 1 {
			t.Errorf("order %d: refunds queued of the payer %d, of the other %d; want 0 and 1", i,
				e.tasks.refundsOf(got.PaymentID), e.tasks.refundsOf(other))
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d live records name a payment that did not pay their order", wrong, len(orders))
	}
}

// The same confirmation delivered twice at once: the second delivery read
// the order pending, and its pay is refused — the first paid it meanwhile
// — and then meets a Redis blip on the re-read that follows the refusal:
// the event fails (the provider sends it again), and nothing is decided —
// no flag, no refund. Before, the failed read fell through to "late" and
// queued the refund of the money that paid the order. Sent again once
// Redis answers, it finds the order paid by it: done.
func TestService_redeliveredConfirmation_readFails_errorNotRefund(t *testing.T) {
	e := newEnv(t, flash)
	h := e.hooked()
	ctx := context.Background()
	o, pid := e.paying(t, 51, 1)
	reached, release := h.holdPayment(pid)
	second := make(chan error, 1)
	go func() { second <- e.succeeded(t, "evt_2", pid, o.No, o.AmountCents) }()
	<-reached                                                       // the second delivery read the order pending; its pay waits
	if _, err := e.orders.ConfirmPaid(ctx, o.No, pid); err != nil { // the first delivery pays it
		t.Fatal(err)
	}
	h.mu.Lock()
	h.failGet = true
	h.mu.Unlock()
	release()
	if err := <-second; !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("the second delivery with the re-read failing: %v, want the read's error", err)
	}
	if n := e.tasks.refundsOf(pid); n != 0 {
		t.Fatalf("%d refunds queued of the payment that paid the order", n)
	}
	if rec := e.recorded(t, o.No); rec.ID != pid || rec.Flag != "" {
		t.Fatalf("the live record: %+v; want %s, unflagged", rec, pid)
	}
	// Redis answers again: the event, sent again, is handled — done.
	e.pay.UseOrders(e.orders)
	if err := e.succeeded(t, "evt_2", pid, o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if n := e.tasks.refundsOf(pid); n != 0 {
		t.Fatalf("%d refunds queued of the payment that paid the order, once Redis answered", n)
	}
}

// A payment that a shopper's order ended around — the order cancelled
// after Start asked the provider for it and before Start recorded it (the
// cancel's own request to the provider found no payment to cancel) — is
// cancelled at the provider by Start itself: the shopper cannot pay an
// order that is gone. Before, it stayed open at the provider.
func TestService_orderCancelledWhileItsPaymentStarts_paymentCancelledAtTheProvider(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	cancelling := &cancelOnCreate{Provider: e.prov, cancel: func() {
		if _, err := e.orders.Cancel(ctx, o.No, 1); err != nil {
			t.Error(err)
		}
	}}
	e.pay = payment.NewService(payment.Deps{Provider: cancelling, Orders: e.orders, Store: e.store(), Tasks: e.tasks}, payment.Config{})
	if _, err := e.pay.Start(ctx, o.No, 1); !errors.Is(err, payment.ErrNotPayable) {
		t.Fatalf("start: %v, want ErrNotPayable (the order was cancelled meanwhile)", err)
	}
	if in := e.atProvider(t, 51, cancelling.created); in.Status != payment.Canceled {
		t.Fatalf("the payment at the provider: %s, want canceled", in.Status)
	}
}

// cancelOnCreate is the provider, running cancel once a payment is created
// and before Create answers.
type cancelOnCreate struct {
	payment.Provider
	cancel  func()
	created string
}

func (c *cancelOnCreate) Create(ctx context.Context, ch payment.Charge) (payment.Intent, error) {
	in, err := c.Provider.Create(ctx, ch)
	if err == nil {
		c.created = in.ID
		c.cancel()
	}
	return in, err
}

// An event of a payment this service did not create (a Checkout on the
// same Stripe account) is ignored and counted: nothing recorded, nothing
// refunded, no order touched.
func TestService_foreignPayment_ignoredAndCounted(t *testing.T) {
	e := newEnv(t, flash)
	foreign := &foreignEvents{Provider: e.prov}
	e.pay = payment.NewService(payment.Deps{Provider: foreign, Orders: e.orders, Store: e.store(), Tasks: e.tasks}, payment.Config{})
	o := e.place(t, 51, 1)
	if err := e.succeeded(t, "evt_checkout", "pi_checkout", o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if err := e.succeeded(t, "evt_link", "pi_link", "", 990); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tasks.refunds) + len(e.tasks.records); n != 0 {
		t.Fatalf("%d tasks queued for payments not ours", n)
	}
	if got, _ := e.orders.Get(context.Background(), o.No, 1); got.Status != order.PendingPayment {
		t.Fatalf("the order: %s, want untouched", got.Status)
	}
	if n := e.pay.ForeignEvents(); n != 2 {
		t.Fatalf("%d foreign events counted, want 2", n)
	}
}

// foreignEvents is the provider whose every event is of a payment this
// service did not create.
type foreignEvents struct{ payment.Provider }

func (f *foreignEvents) ParseEvent(payload []byte, header http.Header) (payment.Event, error) {
	ev, err := f.Provider.ParseEvent(payload, header)
	ev.Foreign = true
	return ev, err
}

// A confirmation delivered again after Redis let its order go (the sale's
// records expired, or were lost), while MySQL holds the order paid by that
// very payment: nothing is refunded — MySQL names the paying payment
// (migrations/00009) — and another payment of the order is a duplicate,
// refunded once. Before, MySQL's orders named no payment, and every such
// confirmation was late money: the payment that paid was refunded.
func TestService_confirmationAfterRedisLostThePaidOrder_judgedFromMySQL(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(ctx, sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	records := mysqlstore.NewOrders(db)
	t.Cleanup(records.Close)
	d := e.sh.Deps(ordertest.NoTasks{})
	d.Payments, d.Records = e.pay, records
	e.orders = order.NewService(d, order.Config{})
	e.pay.UseOrders(e.orders)

	o, pid := e.paying(t, 51, 1)
	if err := e.succeeded(t, "evt_1", pid, o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	paid, err := e.orders.Get(ctx, o.No, 1)
	if err != nil || paid.PaymentID != pid {
		t.Fatalf("the order: %+v, %v", paid, err)
	}
	if err := records.Write(ctx, paid); err != nil { // the worker's sync
		t.Fatal(err)
	}
	if got, err := records.Get(ctx, o.No); err != nil || got.Status != order.Paid || got.PaymentID != pid {
		t.Fatalf("MySQL's order: %+v, %v; want paid by %s", got, err, pid)
	}
	ordertest.DeleteOrder(t, e.sh.RDB, o.No) // Redis lets it go

	if err := e.succeeded(t, "evt_2", pid, o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if n := e.tasks.refundsOf(pid); n != 0 {
		t.Fatalf("%d refunds queued of the payment that paid the order (MySQL says so)", n)
	}
	if err := e.succeeded(t, "evt_dup", "pi_dup", o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if n := e.tasks.refundsOf("pi_dup"); n != 1 {
		t.Fatalf("%d refunds queued of another payment of the paid order, want 1", n)
	}
	for _, r := range e.tasks.refunds {
		if r.ID == "pi_dup" && r.Flag != payment.Duplicate {
			t.Fatalf("the other payment flagged %q, want duplicate", r.Flag)
		}
	}
}

// A sale reloaded with a later end (its end extended): every key of it
// follows the sale's new expiry — the payments hash too, the shards'
// transfer records, the records of its groups not yet settled; only a rate
// limit's window, and a settled group's records (kept retention past their
// settlement), have expiries of their own. The keys are listed from Redis,
// so a key the next change adds is checked too. Before, the payments hash
// kept the first expiry: a sale extended by more than the retention lost
// its payment records, and a failed group's refund found none.
func TestSale_reloadedWithALaterEnd_everyKeyFollowsItsExpiry(t *testing.T) {
	open := activity.Activity{ID: 55, Type: activity.GroupBuy, TotalStock: 10, PerUserLimit: 1, GroupSize: 3, GroupTTL: time.Hour}
	sharded := activity.Activity{ID: 54, Type: activity.Seckill, TotalStock: 9, PerUserLimit: 3, Shards: 3}
	items := activity.Activity{ID: 56, Type: activity.Seckill, PerUserLimit: 3,
		Items: []activity.Item{{SKU: "R", PriceCents: 100, Stock: 5}, {SKU: "B", PriceCents: 80, Stock: 5, PerUserLimit: 1}}}
	e := newEnv(t, groupBuy, open, sharded, items)
	ctx := context.Background()
	pay := func(o order.Order) {
		t.Helper()
		st, err := e.pay.Start(ctx, o.No, o.UserID)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.succeeded(t, "evt_"+o.No, st.Payment.ID, o.No, o.AmountCents); err != nil {
			t.Fatal(err)
		}
	}
	// Sale 52: a group that failed and was settled; its paid order refunded.
	g52, o52, err := e.orders.OpenGroup(ctx, order.PlaceRequest{ActivityID: 52, UserID: 1, Quantity: 1, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	pay(o52)
	// Sale 55: a group forming, one member paid, one not.
	g55, o55, err := e.orders.OpenGroup(ctx, order.PlaceRequest{ActivityID: 55, UserID: 1, Quantity: 1, IdempotencyKey: "k2"})
	if err != nil {
		t.Fatal(err)
	}
	pay(o55)
	if _, err := e.orders.JoinGroup(ctx, g55.ID, order.PlaceRequest{ActivityID: 55, UserID: 2, Quantity: 1, IdempotencyKey: "k3"}); err != nil {
		t.Fatal(err)
	}
	// Sale 54: orders in its shards, units moved between them.
	for u := int64(1); u <= 4; u++ {
		o, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: 54, UserID: u, Quantity: 1, IdempotencyKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		pay(o)
	}
	if _, err := e.sh.Stock.Transfer(ctx, 54, 0, 1, 1); err != nil {
		t.Fatal(err)
	}
	// Sale 56: orders of its items (the items hash, the users' units of each).
	for _, sku := range []string{"R", "B"} {
		if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: 56, UserID: 1, Quantity: 1, Item: sku}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(groupBuy.GroupTTL + 100*time.Millisecond)
	if err := e.orders.Settle(ctx, g52.ID); err != nil {
		t.Fatal(err)
	}

	for _, a := range []activity.Activity{groupBuy, open, sharded, items} {
		a.Name, a.SKU, a.PriceCents, a.Status, a.Version = "n", "s", 100, activity.Published, 1
		if len(a.Items) > 0 {
			a.SKU, a.PriceCents = "", 0
			a.Normalize()
		}
		a.StartsAt, a.EndsAt, a.PaymentTTL = time.Now().Add(-time.Hour), time.Now().Add(25*time.Hour), time.Minute
		if _, err := e.sh.Stock.Load(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	settled := map[string]bool{g52.ID: true}
	checked := map[string]int{}
	for _, pattern := range []string{"fs:{act:52}*", "fs:{act:55}*", "fs:{act:54}*", "fs:{act:54:*", "fs:{act:56}*"} {
		for _, key := range e.sh.RDB.Keys(ctx, pattern).Val() {
			tag := key[:strings.Index(key, "}")+1]
			rest := key[len(tag)+1:]
			kind, id, _ := strings.Cut(rest, ":")
			if kind == "rl" {
				continue // a rate limit's window
			}
			at := e.sh.RDB.PExpireTime(ctx, key).Val().Milliseconds()
			if (kind == "g" || kind == "gm") && settled[id] {
				if at <= time.Now().UnixMilli() {
					t.Errorf("%s, a settled group's record, has no expiry", key)
				}
				continue
			}
			want, err := e.sh.RDB.HGet(ctx, tag+":meta", "expire_at_ms").Int64()
			if err != nil {
				t.Fatalf("%s's meta: %v", key, err)
			}
			if want < time.Now().Add(24*time.Hour).UnixMilli() {
				t.Fatalf("%s:meta expires at %d: the reload did not extend it", tag, want)
			}
			if at != want {
				t.Errorf("%s expires at %d, not with its sale (%d): %v sooner", key, at, want, time.Duration(want-at)*time.Millisecond)
			}
			checked[kind]++
		}
	}
	for _, kind := range []string{"meta", "stock", "users", "orders", "outbox", "idem", "payments", "g", "gm", "groups",
		"taken", "applied", "items", "itemusers"} {
		if checked[kind] == 0 {
			t.Errorf("no %q key was checked (have %v): the test no longer makes one", kind, checked)
		}
	}
}

// A payment saved for an order of a sale whose keys are gone (expired)
// writes nothing: before, it made the sale's payments hash again, with no
// expiry, for ever (a confirmation after Redis let the order go is judged
// from MySQL, and recorded there).
func TestSavePayment_saleGone_writesNoKey(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	if err := e.sh.RDB.FlushAll(ctx).Err(); err != nil { // the sale's keys expired
		t.Fatal(err)
	}
	p := payment.Payment{ID: "pi_gone", Provider: "simulated", OrderNo: o.No, ActivityID: 51, AmountCents: o.AmountCents,
		Currency: "cny", Status: payment.Succeeded}
	saved, err := e.store().SavePayment(ctx, p)
	if err != nil || saved.ID != p.ID {
		t.Fatalf("saved %+v, %v; want the payment as given", saved, err)
	}
	if keys := e.sh.RDB.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("keys made for a sale that is gone: %v", keys)
	}
}

// recordsOf is how many records of payment id were queued.
func (q *queued) recordsOf(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, p := range q.records {
		if p.ID == id {
			n++
		}
	}
	return n
}

// A confirmation pays its order and queues no record of its own: the
// worker's sync of the paid order records the payment (Settle), durably —
// the order is on the outbox until its sync ran. Its replay is done at
// the order's read: paid by it.
func TestService_confirmation_recordQueuedByTheOrdersSync_replayDoneAtTheRead(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o, pid := e.paying(t, 51, 1)
	before := e.tasks.recordsOf(pid) // Start's record of the pending payment
	for _, id := range []string{"evt_1", "evt_1", "evt_1"} {
		if err := e.succeeded(t, id, pid, o.No, o.AmountCents); err != nil {
			t.Fatal(err)
		}
	}
	paid, err := e.orders.Get(ctx, o.No, 0)
	if err != nil || paid.Status != order.Paid || paid.PaymentID != pid {
		t.Fatalf("the order: %+v, %v; want paid by %s", paid, err, pid)
	}
	if n := e.tasks.recordsOf(pid) - before; n != 0 {
		t.Fatalf("the confirmation and its replays queued %d records; want none (the order's sync does)", n)
	}
	if err := e.pay.Settle(ctx, paid); err != nil { // the worker's sync of the paid order
		t.Fatal(err)
	}
	if n := e.tasks.recordsOf(pid) - before; n != 1 {
		t.Fatalf("the paid order's sync queued %d records of its payment; want 1", n)
	}
}

// Two payments of one order raced, and the api that paid the order with B
// died before it saved B over A's record (Service.pay): the order names B,
// the record A, and the worker's sync of the order left the record alone.
// B's confirmation, sent again by the provider, finds the order paid by B
// and finishes: the record is B's, and B's record queued for MySQL.
func TestService_raceLostBeforeTheResave_theReplayFinishesIt(t *testing.T) {
	e := newEnv(t, flash)
	ctx := context.Background()
	o := e.place(t, 51, 1)
	a := payment.Payment{ID: "pi_A", Provider: e.pay.Provider(), OrderNo: o.No, ActivityID: 51, AmountCents: o.AmountCents,
		Currency: "cny", Status: payment.Succeeded, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if _, err := e.store().SavePayment(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.orders.ConfirmPaid(ctx, o.No, "pi_B"); err != nil { // B's api paid the order, then died
		t.Fatal(err)
	}
	if rec := e.recorded(t, o.No); rec.ID != "pi_A" {
		t.Fatalf("the live record before B's replay: %+v; want A's", rec)
	}
	if err := e.succeeded(t, "evt_B", "pi_B", o.No, o.AmountCents); err != nil {
		t.Fatal(err)
	}
	if rec := e.recorded(t, o.No); rec.ID != "pi_B" || rec.Status != payment.Succeeded || rec.Flag != "" {
		t.Fatalf("the live record after B's replay: %+v; want B's, succeeded, unflagged", rec)
	}
	if n := e.tasks.recordsOf("pi_B"); n != 1 {
		t.Fatalf("B's records queued: %d; want 1", n)
	}
	if e.tasks.refundsOf("pi_A")+e.tasks.refundsOf("pi_B") != 0 {
		t.Fatal("a refund was queued by B's replay")
	}
	if err := e.succeeded(t, "evt_B", "pi_B", o.No, o.AmountCents); err != nil { // once more: nothing to do
		t.Fatal(err)
	}
	if n := e.tasks.recordsOf("pi_B"); n != 1 {
		t.Fatalf("B's records queued after another replay: %d; want still 1", n)
	}
}
