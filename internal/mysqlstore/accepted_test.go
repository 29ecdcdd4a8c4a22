package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/embedded"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// An order's order.accepted is its row (migrations/00018), read beside the
// rows of webhook_events: by the dispatcher in commit order, counted,
// skipped and aged with them; by an order's stream with its later events;
// by id for a redelivery, a sharded sale's order too; with the id and
// body the worker derived when it wrote the order (OnCommit's). An order
// written before the migration keeps its order.accepted in webhook_events,
// read once; an order written again is not dispatched again.
//
// On MariaDB, and on go-mysql-server (embedded memory mode), which reads
// the same statements.
func TestOutbox_acceptedIsTheOrdersRow_readWithTheOtherEvents(t *testing.T) {
	onBothServers(t, acceptedIsTheOrdersRow)
}

// onBothServers runs test as subtests on a migrated database of MariaDB
// and of go-mysql-server (embedded memory mode).
func onBothServers(t *testing.T, test func(t *testing.T, db *gorm.DB)) {
	t.Run("mariadb", func(t *testing.T) { test(t, migrated(t)) })
	t.Run("memory", func(t *testing.T) { test(t, memoryDB(t)) })
}

// memoryDB is a migrated database on embedded memory mode's SQL server.
func memoryDB(t *testing.T) *gorm.DB {
	t.Helper()
	st, err := embedded.Start(slog.New(slog.NewTextHandler(io.Discard, nil)), embedded.Memory)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return migratedAt(t, st.MySQLDSN)
}

func acceptedIsTheOrdersRow(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	acts := mysqlstore.NewActivities(db)
	a := sample()
	a.Type, a.GroupSize, a.GroupTTL, a.SKU, a.Shards = activity.Seckill, 0, 0, "SALE-SKU", 4
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.NewOrdersWith(db, mysqlstore.WriteOptions{Currency: "usd"})
	t.Cleanup(s.Close)
	var mu sync.Mutex
	var published []webhook.Event
	s.OnCommit = func(_ context.Context, es []webhook.Event) {
		mu.Lock()
		published = append(published, es...)
		mu.Unlock()
	}
	w := mysqlstore.NewWebhooks(db)
	w.SetCurrency("usd")
	t.Cleanup(w.Close)

	at := time.Now().UTC().Truncate(time.Millisecond)
	// A: an order of the sale's one item (no item of its own: the sale's
	// SKU), numbered in shard 2 of 4; B: an item's, in a group, made at a
	// time of microseconds (as a group's orders are), which its event
	// truncates to the millisecond.
	first := order.Order{No: order.InShard(order.NewNo(a.ID), 2, 4), ActivityID: a.ID, UserID: 7, Quantity: 2, PriceCents: 300,
		AmountCents: 600, Status: order.PendingPayment, Fence: 1, CreatedAt: at}
	second := order.Order{No: order.NewNo(a.ID), ActivityID: a.ID, UserID: 8, Quantity: 1, PriceCents: 300, AmountCents: 300,
		Status: order.Paid, Fence: 2, CreatedAt: at.Add(987 * time.Microsecond), PaidAt: at.Add(time.Second), PaymentID: "pi_B", GroupID: "G-1", Item: "RED"}
	if err := s.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	// An order written before migrations/00018: its row without an
	// event_seq, its events rows of webhook_events.
	old := orderEvents("42-OLD", order.Paid)
	if err := w.Append(ctx, old...); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, second); err != nil {
		t.Fatal(err)
	}
	// What the outbox holds, as the producers' own derivation renders it
	// (the stream's order.accepted before the order is written is the same
	// derivation: stream.Orders.Open); OnCommit got the events appended to
	// webhook_events only, second's order.paid.
	derive := func(o order.Order, sku string) []webhook.Event {
		return webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: sku, Currency: "usd"})
	}
	want := append(append(derive(first, "SALE-SKU"), old...), derive(second, "RED")...)
	mu.Lock()
	if len(published) != 1 || published[0].ID != want[4].ID {
		t.Fatalf("OnCommit got %v, want %v alone: an order.accepted is never published", published, want[4:])
	}
	mu.Unlock()
	names := func(es []webhook.Event) (out []string) {
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s %s #%d", e.Type, e.Subject, e.Sequence))
		}
		return out
	}
	same := func(what string, got, want []webhook.Event) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %v, want %v", what, names(got), names(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.ID != w.ID || g.Type != w.Type || g.Subject != w.Subject || g.Sequence != w.Sequence ||
				g.ActivityID != w.ActivityID || !g.At.Equal(w.At) || string(g.Body) != string(w.Body) {
				t.Fatalf("%s: event %d is\n%+v\n%s\nwant\n%+v\n%s", what, i, g, g.Body, w, w.Body)
			}
		}
	}
	if len(want) != 5 || want[0].Type != webhook.OrderAccepted || want[3].Type != webhook.OrderAccepted || want[4].Type != webhook.OrderPaid {
		t.Fatalf("the events written: %v", names(want))
	}
	if d := eventData(t, want[0]); d["sku"] != "SALE-SKU" || d["currency"] != "usd" {
		t.Fatalf("first's order.accepted: %s", want[0].Body)
	}

	es, _, err := w.Undispatched(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	same("the outbox after its cursor", es, want)
	if n, err := w.CountUndispatched(ctx); err != nil || n != 5 {
		t.Fatalf("undispatched: %d (%v), want 5", n, err)
	}
	if age, err := w.OldestUndispatched(ctx); err != nil || age <= 0 {
		t.Fatalf("the oldest undispatched waited %v (%v)", age, err)
	}
	es, through, err := w.Undispatched(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	same("the first page of 2", es, want[:2])
	if err := w.MarkDispatched(ctx, through); err != nil {
		t.Fatal(err)
	}
	if es, _, err = w.Undispatched(ctx, 100); err != nil {
		t.Fatal(err)
	}
	same("after the first page", es, want[2:])
	if n, err := w.CountUndispatched(ctx); err != nil || n != 3 {
		t.Fatalf("undispatched after the first page: %d (%v), want 3", n, err)
	}
	if n, err := w.Skip(ctx, 100); err != nil || n != 3 {
		t.Fatalf("skipped %d (%v), want 3", n, err)
	}
	if n, err := w.CountUndispatched(ctx); err != nil || n != 0 {
		t.Fatalf("undispatched after the skip: %d (%v)", n, err)
	}
	if age, err := w.OldestUndispatched(ctx); err != nil || age != 0 {
		t.Fatalf("nothing waits, yet the oldest waited %v (%v)", age, err)
	}

	// The repair's read (what was dispatched in a window) and the
	// recovery's (what was appended since a time): both kinds, in order.
	var repaired []webhook.Event
	for cursor := uint64(0); ; {
		page, next, err := w.DispatchedSince(ctx, at.Add(-time.Minute), time.Now().Add(time.Minute), cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			repaired = append(repaired, d.Event)
		}
		if next == cursor {
			break
		}
		cursor = next
	}
	same("dispatched since", repaired, want)
	var recovered []webhook.Event
	for cursor := uint64(0); ; {
		page, next, err := w.EventsSince(ctx, at.Add(-time.Minute), cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		recovered = append(recovered, page...)
		if len(page) < 2 {
			break
		}
		cursor = next
	}
	same("appended since", recovered, want)
	if late, _, err := w.EventsSince(ctx, time.Now().Add(time.Minute), 0, 10); err != nil || len(late) != 0 {
		t.Fatalf("appended since a minute from now: %d events (%v)", len(late), err)
	}

	// An order's stream: its order.accepted first, then the rest.
	for _, c := range []struct {
		no    string
		after int64
		want  []webhook.Event
	}{{second.No, 0, want[3:]}, {second.No, 1, want[4:]}, {first.No, 0, want[:1]}, {first.No, 1, nil}, {"42-OLD", 0, old}} {
		got, err := w.Of(ctx, c.no, c.after)
		if err != nil {
			t.Fatal(err)
		}
		same(fmt.Sprintf("the events of %s after %d", c.no, c.after), got, c.want)
	}

	// By id: an order's order.accepted (in a shard of its sale, and not),
	// the others', and an id of no event.
	for _, e := range want {
		got, err := w.Event(ctx, e.ID)
		if err != nil {
			t.Fatalf("event %s (%s %s): %v", e.ID, e.Type, e.Subject, err)
		}
		same("event "+e.ID, []webhook.Event{got}, []webhook.Event{e})
	}
	for _, id := range []string{webhook.ID(webhook.OrderAccepted, order.NewNo(a.ID), 1), webhook.ID(webhook.OrderAccepted, "x", 1), "evt_nope", ""} {
		if _, err := w.Event(ctx, id); !errors.Is(err, webhook.ErrNotFound) {
			t.Fatalf("event %q: %v, want not found", id, err)
		}
	}

	// Written again, paid: its order.paid is new, its order.accepted is not.
	first.Status, first.Fence, first.PaidAt, first.PaymentID = order.Paid, 2, at.Add(time.Minute), "pi_A"
	if err := s.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	if es, _, err = w.Undispatched(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Type != webhook.OrderPaid || es[0].Subject != first.No {
		t.Fatalf("after the order's second write: %v, want its order.paid alone", names(es))
	}
}

// Order writes of several stores (as of several workers) and other
// appends, at once, some rolled back: the dispatcher, reading 7 at a time
// after its cursor, sees every committed event once, the orders'
// order.accepted among them, none of a rolled-back append.
func TestOutbox_concurrentOrderWritesAndAppends_eachDispatchedOnce(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writing := make(chan struct{})
	dispatched := dispatchUntil(ctx, w, writing)
	var mu sync.Mutex
	var committed []string
	var wg sync.WaitGroup
	const stores, writers, each = 3, 4, 40
	for st := range stores {
		s := mysqlstore.NewOrders(db)
		s.OnCommit = func(_ context.Context, es []webhook.Event) {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range es {
				committed = append(committed, e.ID)
			}
		}
		defer s.Close()
		for g := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					o := order.Order{No: order.NewNo(42), ActivityID: 42, UserID: int64(st*10_000 + g*100 + i), Quantity: 1, PriceCents: 5,
						AmountCents: 5, Status: order.PendingPayment, Fence: 1, CreatedAt: time.Now(), Item: "X"}
					if i%3 == 2 {
						o.Status, o.Fence, o.PaidAt, o.PaymentID = order.Paid, 2, time.Now(), "pi"
					}
					if err := s.Write(ctx, o); err != nil {
						t.Error(err)
						return
					}
					// Its order.accepted (its row): OnCommit has its later
					// events only.
					mu.Lock()
					committed = append(committed, webhook.ID(webhook.OrderAccepted, o.No, webhook.SeqAccepted))
					mu.Unlock()
				}
			}()
		}
	}
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				es := []webhook.Event{orderEvents(fmt.Sprintf("42-A%d-%d", g, i), order.Paid)[1]}
				err := w.Append(ctx, es...)
				if i%10 == 9 { // and one rolled back after its append
					_ = db.Transaction(func(tx *gorm.DB) error {
						if err := mysqlstore.AppendTx(tx, orderEvents(fmt.Sprintf("42-R%d-%d", g, i), order.Paid)[1]); err != nil {
							return err
						}
						return errors.New("rolled back")
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				committed = append(committed, es[0].ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(writing)
	seen, err := dispatched()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(committed)
	committed = slices.Compact(committed)
	for _, id := range committed {
		if seen[id] != 1 {
			t.Errorf("event %s dispatched %d times, want once", id, seen[id])
		}
	}
	if want := stores*writers*(each+each/3) + writers*each; len(committed) != want || len(seen) != len(committed) {
		t.Fatalf("%d events dispatched, %d committed, want %d", len(seen), len(committed), want)
	}
}

// The dispatcher reads webhook_events, then the orders: an event committed
// between the two reads (a payment's, then an order) is not passed over.
// Its read is bounded by the clock's last committed seq, read first: the
// order committed in between is above it too, read at the next pass with
// the event below it. Without the bound, the cursor moved to the order's
// seq and the event below it was never read.
func TestOutbox_commitsBetweenTheTwoReads_notPassedOver(t *testing.T) {
	ctx, s, w := ordersAndOutbox(t)
	o := order.Order{No: order.NewNo(42), ActivityID: 42, UserID: 1, Quantity: 1, PriceCents: 5, AmountCents: 5,
		Status: order.PendingPayment, Fence: 1, CreatedAt: time.Now(), Item: "X"}
	if err := s.Write(ctx, o); err != nil {
		t.Fatal(err)
	}
	payment := orderEvents("42-PAY", order.Paid)[1]
	late := o
	late.No, late.UserID = order.NewNo(42), 2
	once := true
	w.BetweenReads(func() {
		if !once {
			return
		}
		once = false
		if err := w.Append(ctx, payment); err != nil {
			t.Error(err)
		}
		if err := s.Write(ctx, late); err != nil {
			t.Error(err)
		}
	})
	seen := map[string]bool{}
	for range 3 {
		es, through, err := w.Undispatched(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			seen[e.Subject] = true
		}
		if err := w.MarkDispatched(ctx, through); err != nil {
			t.Fatal(err)
		}
	}
	if !seen[o.No] || !seen["42-PAY"] || !seen[late.No] || len(seen) != 3 {
		t.Fatalf("dispatched the events of %v, want %s, 42-PAY and %s", seen, o.No, late.No)
	}
}

// An order's stream reads the order's events, then its row: an order
// written (paid) between the two reads shows its order.accepted alone (its
// order.paid reaches the stream live), never order.paid without the
// order.accepted a stream starts with.
func TestOutbox_ofAnOrderWrittenBetweenTheTwoReads_acceptedFirst(t *testing.T) {
	ctx, s, w := ordersAndOutbox(t)
	o := order.Order{No: order.NewNo(42), ActivityID: 42, UserID: 1, Quantity: 1, PriceCents: 5, AmountCents: 5,
		Status: order.Paid, Fence: 2, CreatedAt: time.Now(), PaidAt: time.Now(), PaymentID: "pi", Item: "X"}
	once := true
	w.BetweenReads(func() {
		if once {
			once = false
			if err := s.Write(ctx, o); err != nil {
				t.Error(err)
			}
		}
	})
	es, err := w.Of(ctx, o.No, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) == 0 || es[0].Type != webhook.OrderAccepted {
		var types []webhook.Type
		for _, e := range es {
			types = append(types, e.Type)
		}
		t.Fatalf("the order's events read across its write: %v, want order.accepted first", types)
	}
	if es, err = w.Of(ctx, o.No, 0); err != nil || len(es) != 2 {
		t.Fatalf("read again: %d events (%v), want accepted and paid", len(es), err)
	}
}

// ordersAndOutbox are an orders store and the outbox's repository on a
// fresh database.
func ordersAndOutbox(t *testing.T) (context.Context, *mysqlstore.Orders, *mysqlstore.Webhooks) {
	t.Helper()
	db := migrated(t)
	s := mysqlstore.NewOrders(db)
	t.Cleanup(s.Close)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	return context.Background(), s, w
}
