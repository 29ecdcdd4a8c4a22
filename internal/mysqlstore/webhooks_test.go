package mysqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/payment"
	"github.com/flashsale/flashsale/internal/webhook"
)

func orderEvents(no string, status order.Status) []webhook.Event {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := order.Order{No: no, ActivityID: 42, UserID: 7, Quantity: 1, AmountCents: 500, Status: status,
		CreatedAt: at, PaidAt: at.Add(time.Minute)}
	return webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "S", Currency: "cny"})
}

// Appending an order's events at each of its changes keeps one row an
// event; the dispatcher reads them in the order appended, and an order's
// stream reads its own by sequence.
func TestWebhooks_appendTx_oneRowAnEvent_readInOrder(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	appendTx := func(es []webhook.Event) {
		t.Helper()
		if err := db.Transaction(func(tx *gorm.DB) error { return mysqlstore.AppendTx(tx, es...) }); err != nil {
			t.Fatal(err)
		}
	}
	appendTx(orderEvents("42-A", order.PendingPayment))
	appendTx(orderEvents("42-B", order.PendingPayment))
	appendTx(orderEvents("42-A", order.Paid)) // accepted again, and paid
	got, _, err := w.Undispatched(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range got {
		seen = append(seen, e.Subject+"/"+string(e.Type))
	}
	want := []string{"42-A/order.accepted", "42-B/order.accepted", "42-A/order.paid"}
	if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("undispatched %v, want %v", seen, want)
	}
	if string(got[2].Body) != string(orderEvents("42-A", order.Paid)[1].Body) || got[2].ActivityID != 42 {
		t.Fatalf("stored %+v", got[2])
	}
	two, through, err := w.Undispatched(ctx, 2)
	if err != nil || len(two) != 2 || two[1].ID != got[1].ID {
		t.Fatalf("the first two: %+v %v", two, err)
	}
	if err := w.MarkDispatched(ctx, through); err != nil {
		t.Fatal(err)
	}
	rest, last, _ := w.Undispatched(ctx, 10)
	if len(rest) != 1 || rest[0].ID != got[2].ID {
		t.Fatalf("after marking two: %+v", rest)
	}
	if err := w.MarkDispatched(ctx, last); err != nil {
		t.Fatal(err)
	}
	// Nothing left: no event, position 0 (nothing to mark), no error.
	if none, at, err := w.Undispatched(ctx, 10); len(none) != 0 || at != 0 || err != nil {
		t.Fatalf("after marking all: %+v at %d, %v", none, at, err)
	}
	if of, _ := w.Of(ctx, "42-A", 1); len(of) != 1 || of[0].Type != webhook.OrderPaid {
		t.Fatalf("42-A after 1: %+v", of)
	}
	if _, err := w.Event(ctx, "evt_none"); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("an unknown event: %v", err)
	}
	// A transaction that rolls back leaves no event behind.
	_ = db.Transaction(func(tx *gorm.DB) error {
		if err := mysqlstore.AppendTx(tx, orderEvents("42-C", order.PendingPayment)...); err != nil {
			t.Fatal(err)
		}
		return errors.New("the change failed")
	})
	if of, _ := w.Of(ctx, "42-C", 0); len(of) != 0 {
		t.Fatalf("a rolled-back change's events: %+v", of)
	}
}

// The admin's close appends activity.closed with the change's version, in
// its transaction; closing again appends nothing, and neither does any
// other change.
func TestActivities_close_appendsActivityClosedOnce(t *testing.T) {
	db := migrated(t)
	acts, w := mysqlstore.NewActivities(db), mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	a := sample()
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	setStatus := func(s activity.Status) activity.Activity {
		t.Helper()
		out, err := acts.Update(ctx, a.ID, func(x *activity.Activity) error { x.Status = s; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	setStatus(activity.Published)
	closed := setStatus(activity.Closed)
	setStatus(activity.Closed)
	es, _, err := w.Undispatched(ctx, 10)
	if err != nil || len(es) != 1 {
		t.Fatalf("events %+v, %v: want one activity.closed", es, err)
	}
	if es[0].Type != webhook.ActivityClosed || es[0].Sequence != closed.Version || es[0].ActivityID != a.ID {
		t.Fatalf("event %+v, want activity.closed at version %d", es[0], closed.Version)
	}
}

// A pause appends activity.paused and a resume activity.resumed, each
// with its change's version, in its transaction; pausing a paused sale
// appends nothing.
func TestActivities_pauseResume_appendTheirEvents(t *testing.T) {
	db := migrated(t)
	acts, w := mysqlstore.NewActivities(db), mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	a := sample()
	if err := acts.Create(ctx, &a); err != nil {
		t.Fatal(err)
	}
	set := func(f func(*activity.Activity)) activity.Activity {
		t.Helper()
		out, err := acts.Update(ctx, a.ID, func(x *activity.Activity) error { f(x); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	set(func(x *activity.Activity) { x.Status = activity.Published })
	paused := set(func(x *activity.Activity) { x.Paused = true })
	set(func(x *activity.Activity) { x.Paused = true })
	resumed := set(func(x *activity.Activity) { x.Paused = false })
	es, _, err := w.Undispatched(ctx, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("events %+v, %v: want activity.paused and activity.resumed", es, err)
	}
	if es[0].Type != webhook.ActivityPaused || es[0].Sequence != paused.Version ||
		es[1].Type != webhook.ActivityResumed || es[1].Sequence != resumed.Version {
		t.Fatalf("events %+v, want paused at %d, resumed at %d", es, paused.Version, resumed.Version)
	}
}

// The record of a payment that first carries a flag appends
// payment.flagged with it; writing it again, or an unflagged payment,
// appends nothing.
func TestPayments_writeFlagged_appendsPaymentFlaggedOnce(t *testing.T) {
	db := migrated(t)
	ps, w := mysqlstore.NewPayments(db), mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	at := time.Now().UTC()
	p := payment.Payment{ID: "pi_1", Provider: "simulated", OrderNo: "42-A", ActivityID: 42, AmountCents: 500, Currency: "cny",
		Status: payment.Succeeded, CreatedAt: at, UpdatedAt: at}
	for _, write := range []func(){
		func() { _ = ps.WritePayment(ctx, p) }, // paid its order: no flag
		func() { q := p; q.Flag = payment.Duplicate; _ = ps.WritePayment(ctx, q) },
		func() { q := p; q.Flag = payment.Duplicate; q.RefundID = "re_1"; _ = ps.WritePayment(ctx, q) },
		func() { q := p; q.ID, q.Flag = "pi_2", payment.Late; _ = ps.WritePayment(ctx, q) },
	} {
		write()
	}
	es, _, err := w.Undispatched(ctx, 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("events %+v, %v: want pi_1's and pi_2's payment.flagged", es, err)
	}
	for i, id := range []string{"pi_1", "pi_2"} {
		if es[i].Type != webhook.PaymentFlagged || es[i].Subject != id {
			t.Errorf("event %d: %+v", i, es[i])
		}
	}
}

func TestWebhooks_endpoints_createUpdateDisableDelete(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	e := webhook.Endpoint{URL: "https://shop.example/hooks", Events: []string{"order.paid", "order.accepted"}, Enabled: true,
		Secret: webhook.NewSecret()}
	if err := w.CreateEndpoint(ctx, &e); err != nil || e.ID == 0 {
		t.Fatalf("create: %v, id %d", err, e.ID)
	}
	got, err := w.Endpoint(ctx, e.ID)
	if err != nil || got.URL != e.URL || got.Secret != e.Secret || len(got.Events) != 2 || !got.Enabled {
		t.Fatalf("read back %+v, %v", got, err)
	}
	refused := errors.New("no")
	if _, err := w.UpdateEndpoint(ctx, e.ID, func(*webhook.Endpoint) error { return refused }); err != refused {
		t.Fatalf("fn's error comes back as %v", err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	up, err := w.UpdateEndpoint(ctx, e.ID, func(x *webhook.Endpoint) error {
		x.PreviousSecret, x.PreviousUntil, x.Secret = x.Secret, until, webhook.NewSecret()
		return nil
	})
	if err != nil || up.PreviousSecret != e.Secret {
		t.Fatalf("rotate: %+v, %v", up, err)
	}
	if again, _ := w.Endpoint(ctx, e.ID); !again.PreviousUntil.Equal(until) || again.Secret != up.Secret {
		t.Fatalf("rotation read back %+v", again)
	}
	for i, want := range []bool{true, false} {
		if ok, err := w.DisableFailing(ctx, e.ID); ok != want || err != nil {
			t.Fatalf("disable #%d: %v, %v", i+1, ok, err)
		}
	}
	if n, _ := w.CountDisabledFailing(ctx); n != 1 {
		t.Fatalf("%d disabled", n)
	}
	w.Record(webhook.Attempt{EndpointID: e.ID, EventID: "evt_1", Type: webhook.OrderPaid, Number: 1, Status: 200,
		Delivered: true, Last: true, At: time.Now()})
	if err := w.DeleteEndpoint(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Endpoint(ctx, e.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("deleted, read: %v", err)
	}
	if err := w.DeleteEndpoint(ctx, e.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("deleted twice: %v", err)
	}
}

// The delivery log is written in the background, newest first when read,
// and says whether an endpoint delivered anything since a moment.
func TestWebhooks_attempts_writtenAndRead(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	ctx := context.Background()
	t0 := time.Now().UTC()
	for i := range 5 {
		w.Record(webhook.Attempt{EndpointID: 1, EventID: "evt_" + string(rune('A'+i%2)), Type: webhook.OrderPaid, Number: i + 1,
			Status: 500, Latency: 1500 * time.Microsecond, Error: "answered 500", At: t0.Add(time.Duration(i) * time.Second)})
	}
	w.Record(webhook.Attempt{EndpointID: 2, EventID: "evt_A", Type: webhook.OrderPaid, Number: 1, Status: 204, Delivered: true,
		Last: true, At: t0.Add(10 * time.Second)})
	w.Close() // writes them
	page, total, err := w.Attempts(ctx, 1, "", 1, 2)
	if err != nil || total != 5 || len(page) != 2 || page[0].Number != 5 || page[0].Latency != 1500*time.Microsecond {
		t.Fatalf("page 1 of endpoint 1: %+v, total %d, %v", page, total, err)
	}
	if _, total, _ := w.Attempts(ctx, 1, "evt_A", 1, 10); total != 3 {
		t.Fatalf("evt_A's attempts: %d", total)
	}
	for _, tc := range []struct {
		ep    int64
		since time.Time
		want  bool
	}{{1, t0, false}, {2, t0, true}, {2, t0.Add(11 * time.Second), false}} {
		if got, err := w.DeliveredSince(ctx, tc.ep, tc.since); got != tc.want || err != nil {
			t.Errorf("endpoint %d delivered since %v: %v, %v", tc.ep, tc.since, got, err)
		}
	}
}

// The dispatcher reads the outbox by a cursor: what was read and marked is
// not read again, what is appended after is, the counts follow the cursor,
// and marking writes one row a pass (webhook_dispatches), not one an event.
func TestWebhooks_cursor_readAfterMarked_oneRowAPass(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	if _, c, err := w.Undispatched(ctx, 10); err != nil || c != 0 {
		t.Fatalf("an empty outbox's cursor: %d %v", c, err)
	}
	if err := w.Append(ctx, append(orderEvents("42-S1", order.Paid), orderEvents("42-S2", order.PendingPayment)...)...); err != nil {
		t.Fatal(err)
	}
	got, through, err := w.Undispatched(ctx, 2)
	if err != nil || len(got) != 2 || got[0].Subject != "42-S1" || got[1].Type != webhook.OrderPaid {
		t.Fatalf("first read: %+v %v", got, err)
	}
	if err := w.MarkDispatched(ctx, through); err != nil {
		t.Fatal(err)
	}
	if n, err := w.CountUndispatched(ctx); err != nil || n != 1 {
		t.Fatalf("undispatched after marking two of three: %d %v", n, err)
	}
	if err := w.Append(ctx, orderEvents("42-S3", order.PendingPayment)...); err != nil {
		t.Fatal(err)
	}
	rest, through2, err := w.Undispatched(ctx, 10)
	if err != nil || len(rest) != 2 || rest[0].Subject != "42-S2" || rest[1].Subject != "42-S3" || through2 <= through {
		t.Fatalf("second read: %+v %d %v", rest, through2, err)
	}
	if err := w.MarkDispatched(ctx, through2); err != nil {
		t.Fatal(err)
	}
	// A pass the cursor has passed (a leader that lost its lead) moves
	// nothing back.
	if err := w.MarkDispatched(ctx, through); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.CountUndispatched(ctx); n != 0 {
		t.Fatalf("undispatched after marking all: %d", n)
	}
	if old, _ := w.OldestUndispatched(ctx); old != 0 {
		t.Fatalf("oldest undispatched: %v", old)
	}
	if none, _, _ := w.Undispatched(ctx, 10); len(none) != 0 {
		t.Fatalf("after all: %+v", none)
	}
	if c, err := w.Cursor(ctx); err != nil || c != through2 {
		t.Fatalf("the cursor after all: %d %v, want %d", c, err, through2)
	}
	var passes, appends int64
	db.Raw("SELECT COUNT(*) FROM webhook_dispatches WHERE through_seq > 0").Scan(&passes)
	db.Raw("SELECT appends FROM webhook_outbox_clock WHERE id = 1").Scan(&appends)
	if passes != 2 || appends != 2 {
		t.Fatalf("%d passes recorded, want 2; the clock counted %d appending commits, want 2", passes, appends)
	}
}

// An appending transaction holds the outbox's clock until it commits: a
// second one waits for it, and the dispatcher sees neither event until the
// first commits (its seq is below the second's), then both in commit order.
// Without the clock the second would commit first, the dispatcher would
// read it and move its cursor past the first's seq, and the first would
// never be dispatched.
func TestWebhooks_clock_appendsCommitInSeqOrder(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	first := db.Begin()
	t.Cleanup(func() { first.Rollback() }) // before the pool closes, which waits for it
	if err := mysqlstore.AppendTx(first, orderEvents("42-F", order.PendingPayment)...); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		second <- db.Transaction(func(tx *gorm.DB) error { return mysqlstore.AppendTx(tx, orderEvents("42-G", order.PendingPayment)...) })
	}()
	select {
	case err := <-second:
		t.Fatalf("the second append committed while the first held the clock (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if es, _, _ := w.Undispatched(ctx, 10); len(es) != 0 {
		t.Fatalf("events seen before either committed: %+v", es)
	}
	if err := first.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	es, _, err := w.Undispatched(ctx, 10)
	if err != nil || len(es) != 2 || es[0].Subject != "42-F" || es[1].Subject != "42-G" {
		t.Fatalf("after both: %+v %v", es, err)
	}
}

// Many transactions appending at once (8 connections) while a dispatcher
// reads and moves its cursor all along: every event committed is
// dispatched exactly once, none skipped by the cursor, none twice; the
// rolled-back ones never.
func TestWebhooks_cursor_concurrentAppends_eachDispatchedOnce(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const writers, each = 8, 60
	appending := make(chan struct{})
	dispatched := dispatchUntil(ctx, w, appending)
	var wg sync.WaitGroup
	committed := make([][]string, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				es := orderEvents(fmt.Sprintf("42-W%d-%d", g, i), order.PendingPayment)
				rollback := i%10 == 9
				err := db.Transaction(func(tx *gorm.DB) error {
					if err := mysqlstore.AppendTx(tx, es...); err != nil {
						return err
					}
					// A commit that takes its time after the insert (a
					// slow flush): without the clock, others would commit
					// above it meanwhile, and the cursor pass it.
					if err := tx.Exec("SELECT SLEEP(0.001)").Error; err != nil {
						return err
					}
					if rollback {
						return errors.New("rolled back")
					}
					return nil
				})
				if rollback {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				for _, e := range es {
					committed[g] = append(committed[g], e.ID)
				}
			}
		}()
	}
	wg.Wait()
	close(appending)
	seen, err := dispatched()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ids := range committed {
		for _, id := range ids {
			n++
			if seen[id] != 1 {
				t.Errorf("event %s dispatched %d times, want once", id, seen[id])
			}
		}
	}
	if len(seen) != n {
		t.Errorf("%d events dispatched, %d committed", len(seen), n)
	}
	if n != writers*each*9/10 {
		t.Fatalf("%d events committed", n)
	}
}

// The outbox keeps one row an event by its subject, sequence and type
// (migrations/00017): an event appended under an id of the older form (a
// hash alone, before ids carried their order's time) and derived again
// under the new one is still one row, with its first id, delivered once.
func TestWebhooks_appendTx_sameEventAnotherIdForm_oneRowFirstIdKept(t *testing.T) {
	db := migrated(t)
	w := mysqlstore.NewWebhooks(db)
	t.Cleanup(w.Close)
	ctx := context.Background()
	no := order.NewNo(42)
	es := orderEvents(no, order.PendingPayment)
	old := es[0]
	old.ID = "evt_0123456789ABCDEFGHJKMNPQRS" // the older form: a hash
	if err := w.Append(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, orderEvents(no, order.Paid)...); err != nil { // accepted again, and paid
		t.Fatal(err)
	}
	got, _, err := w.Undispatched(ctx, 10)
	if err != nil || len(got) != 2 || got[0].ID != old.ID || got[1].Type != webhook.OrderPaid {
		t.Fatalf("outbox %+v %v; want the accepted event once under its first id, then paid", got, err)
	}
	if e, err := w.Event(ctx, got[1].ID); err != nil || e.Type != webhook.OrderPaid {
		t.Fatalf("found by id: %+v %v", e, err)
	}
}

// dispatchUntil runs a dispatcher, 7 events a pass, until one pass after
// last is closed has found nothing; the function it returns waits for that
// and says how often each event id was dispatched.
func dispatchUntil(ctx context.Context, w *mysqlstore.Webhooks, last <-chan struct{}) func() (map[string]int, error) {
	seen := map[string]int{}
	done := make(chan error, 1)
	go func() {
		over := false
		for {
			es, through, err := w.Undispatched(ctx, 7)
			if err != nil {
				done <- err
				return
			}
			for _, e := range es {
				seen[e.ID]++
			}
			if err := w.MarkDispatched(ctx, through); err != nil {
				done <- err
				return
			}
			if len(es) == 0 {
				if over {
					done <- nil
					return
				}
				select {
				case <-last:
					over = true // one more read after the last commit
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()
	return func() (map[string]int, error) { err := <-done; return seen, err }
}
