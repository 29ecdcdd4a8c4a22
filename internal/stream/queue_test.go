package stream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/stream"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// A queue stream on a real waiting room: its place at once; with the tick
// an hour, nothing moves it but a nudge (Publisher.NudgeQueue), which makes
// the watcher read at once: a close reaches the stream, which ends.
// The hub's close ends the others with ErrClosed.
func TestQueue_nudgeReadsAtOnce_closeEnds_hubCloseEndsTheRest(t *testing.T) {
	sh := ordertest.New(t)
	ctx := context.Background()
	sale := activity.Activity{
		ID: 7, Type: activity.Seckill, Name: "sale", SKU: "S", PriceCents: 100, TotalStock: 10,
		PerUserLimit: 1, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour), PaymentTTL: time.Minute,
		Status: activity.Published, WaitingRoom: true, AdmitPerSecond: 1, AdmissionTTL: time.Minute, Version: 1,
	}
	if _, err := sh.Stock.Load(ctx, sale); err != nil {
		t.Fatal(err)
	}
	signer, err := waitingroom.NewSigner("0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	room := waitingroom.New(sh.RDB, signer)
	for u := int64(1); u <= 4; u++ {
		if _, err := room.Join(ctx, sale.ID, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	hub := newHub(t, sh.RDB, stream.Config{})
	q := stream.NewQueue(hub, room, stream.QueueConfig{Tick: time.Hour})
	if _, err := q.Open(ctx, sale.ID, 99); !errors.Is(err, waitingroom.ErrNotInQueue) {
		t.Fatalf("open not joined: %v, want ErrNotInQueue", err)
	}
	st, err := q.Open(ctx, sale.ID, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := q.Open(ctx, sale.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if p, ok, err := st.Next(ctx, nil); err != nil || !ok || p.Status != waitingroom.Waiting || p.Ticket != 4 {
		t.Fatalf("first: %+v %v %v, want waiting with ticket 4", p, ok, err)
	}
	if _, _, err := other.Next(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Nothing moves it before a nudge (the tick is an hour).
	if p, ok, err := st.Next(ctx, time.After(300*time.Millisecond)); ok || err != nil {
		t.Fatalf("before a nudge: %+v %v %v, want nothing", p, ok, err)
	}
	if s := q.Stats(); s.Open != 2 || s.Sales != 1 {
		t.Fatalf("stats %+v, want 2 open of 1 sale", s)
	}

	sale.Status, sale.Version = activity.Closed, 2
	if _, err := sh.Stock.Load(ctx, sale); err != nil {
		t.Fatal(err)
	}
	if err := stream.NewPublisher(sh.RDB).NudgeQueue(ctx, sale.ID); err != nil {
		t.Fatal(err)
	}
	p, ok, err := st.Next(ctx, time.After(2*time.Second))
	if err != nil || !ok || p.Status != waitingroom.Closed {
		t.Fatalf("after the close's nudge: %+v %v %v, want closed within 2 s", p, ok, err)
	}
	if _, _, err := st.Next(ctx, nil); !errors.Is(err, stream.ErrEnded) {
		t.Fatalf("after closed: %v, want ErrEnded", err)
	}
	st.Close()

	// The other stream got the close too; a fresh one, waiting, ends with
	// the hub.
	sale2 := sale
	sale2.ID, sale2.Status, sale2.Version = 8, activity.Published, 1
	if _, err := sh.Stock.Load(ctx, sale2); err != nil {
		t.Fatal(err)
	}
	for u := int64(1); u <= 3; u++ {
		if _, err := room.Join(ctx, sale2.ID, u, waitingroom.Proof{}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := q.Open(ctx, sale2.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	if p, _, _ := last.Next(ctx, nil); p.Status != waitingroom.Waiting {
		t.Fatalf("sale 2, user 3: %+v, want waiting", p)
	}
	hub.Close()
	if _, _, err := last.Next(ctx, time.After(5*time.Second)); !errors.Is(err, stream.ErrClosed) {
		t.Fatalf("after the hub's close: %v, want ErrClosed", err)
	}
	if s := q.Stats(); s.Open != 0 {
		t.Fatalf("stats after the hub's close %+v, want none open", s)
	}
}
