package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
)

// stalledTasks queue nothing and answer only when their context ends: a
// task queue behind a silent network link.
type stalledTasks struct {
	ordertest.NoTasks
	deadline chan time.Time
}

func (s stalledTasks) Sync(ctx context.Context, _ string, _ int64) error {
	d, _ := ctx.Deadline()
	s.deadline <- d
	<-ctx.Done()
	return ctx.Err()
}

// A change already made is answered by the request's deadline and
// FollowUpGrace more, whatever its follow-ups wait for (the network soak
// found a cancel answered after 11 s: its Sync task queued on a silent
// Redis link with no deadline at all); the follow-up still gets a bounded
// chance, past the request's end.
func TestService_changeMade_followUpsBoundedByTheRequestsDeadline(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 31, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	tasks := stalledTasks{deadline: make(chan time.Time, 1)}
	svc := sh.Service(tasks)
	o, err := svc.Place(context.Background(), order.PlaceRequest{ActivityID: 31, UserID: 7, Quantity: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	reqDeadline, _ := ctx.Deadline()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := svc.Cancel(ctx, o.No, 7)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel is still waiting for its follow-up 5 s later")
	}
	took := time.Since(start)
	if took > 300*time.Millisecond+order.FollowUpGrace+500*time.Millisecond {
		t.Errorf("answered after %v; want by the deadline (300 ms) and the grace (%v)", took, order.FollowUpGrace)
	}
	if d := <-tasks.deadline; !d.Equal(reqDeadline.Add(order.FollowUpGrace)) {
		t.Errorf("the follow-up's deadline %v, want the request's and the grace: %v", d, reqDeadline.Add(order.FollowUpGrace))
	}
	got, err := sh.Store.Get(context.Background(), o.No)
	if err != nil || got.Status != order.Cancelled {
		t.Fatalf("the order after the cancel: %v %v; want cancelled (the change stands)", got.Status, err)
	}
}

// bufferedTasks only remember (as tasks.Relay does): order.Buffered.
type bufferedTasks struct {
	ordertest.NoTasks
	deadline chan time.Time
}

func (bufferedTasks) Buffered() {}

func (b bufferedTasks) ExpireThenSync(ctx context.Context, _ string, _ time.Time) error {
	d, _ := ctx.Deadline()
	b.deadline <- d
	return nil
}

// Tasks that only remember are called with the request's context as it
// is: no follow-up context (and timer) of their own for a call that cannot
// wait; those that may wait get one (above).
func TestService_bufferedTasks_getTheRequestsContext(t *testing.T) {
	sh := ordertest.New(t, activity.Activity{ID: 32, Type: activity.Seckill, TotalStock: 10, PerUserLimit: 1})
	tasks := bufferedTasks{deadline: make(chan time.Time, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqDeadline, _ := ctx.Deadline()
	if _, err := sh.Service(tasks).Place(ctx, order.PlaceRequest{ActivityID: 32, UserID: 7, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	if d := <-tasks.deadline; !d.Equal(reqDeadline) {
		t.Fatalf("the relay's call had deadline %v, want the request's own %v", d, reqDeadline)
	}
}

// BenchmarkFollowUp: what a follow-up context costs each call it is made
// for — what Tasks that only remember (order.Buffered) no longer pay an
// order (go test -run '^$' -bench FollowUp -benchmem ./internal/order/).
func BenchmarkFollowUp(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		_, done := order.FollowUp(ctx)
		done()
	}
}
