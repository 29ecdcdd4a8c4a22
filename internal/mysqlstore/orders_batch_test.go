package mysqlstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

// Writes that arrive while a statement is in flight share the next one, and
// Close writes them before it returns. The first statement is held (its
// beforeUpsert) until 100 more writers wait and Close was called: one statement
// for the first order, one for the 100, every Write nil, every row there.
// (An internal test: it waits on the loop's Pending count rather than on
// time.)
func TestOrders_concurrentWrites_shareOneStatement_andCloseWritesWhatWaits(t *testing.T) {
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	var statements atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	s := NewOrders(db)
	s.beforeUpsert = func() {
		if statements.Add(1) == 1 {
			close(entered)
			<-release
		}
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			close(release)
			s.Close()
		}
	})

	ctx := context.Background()
	newOrder := func(user int64) order.Order {
		return order.Order{No: order.NewNo(3), ActivityID: 3, UserID: user, Quantity: 1, PriceCents: 100, AmountCents: 100,
			Status: order.PendingPayment, CreatedAt: time.Now(), PayBy: time.Now().Add(time.Minute)}
	}
	const waiting = 100
	errs := make(chan error, waiting+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); errs <- s.Write(ctx, newOrder(1)) }()
	<-entered // the first statement is in flight
	for u := range waiting {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.Write(ctx, newOrder(int64(u+2))) }()
	}
	for deadline := time.Now().Add(30 * time.Second); s.writes.Pending() < waiting; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writers waiting after 30s", s.writes.Pending(), waiting)
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	for s.writes.Add() { // adds nothing; false once Close began
		time.Sleep(time.Millisecond)
	}
	close(release) // Close is waiting for the statement in flight: the 100 wait for it
	closed = true
	<-done

	var rows int64
	if err := db.Model(&OrderRow{}).Where("activity_id = 3").Count(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if rows != waiting+1 || statements.Load() != 2 {
		t.Fatalf("after Close: %d rows in %d statements; want %d in 2", rows, statements.Load(), waiting+1)
	}
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) != 0 {
		t.Fatalf("%d writes failed: %v", len(failed), failed[0])
	}
	if err := s.Write(ctx, newOrder(999)); err != ErrClosed {
		t.Fatalf("a write after Close: %v, want ErrClosed", err)
	}
}
