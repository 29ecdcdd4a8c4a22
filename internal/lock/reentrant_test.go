package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/lock"
)

func TestReentrant_nestedHolds_countDownToRelease(t *testing.T) {
	_, _, c := setup(t)
	r := c.Reentrant()
	a := lock.WithOwner(context.Background(), "owner-a")
	b := lock.WithOwner(context.Background(), "owner-b")

	var holds []*lock.Lock
	for depth := 1; depth <= 3; depth++ {
		l, err := r.TryObtain(a, "k", time.Second)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		holds = append(holds, l)
		if l.Fence() != holds[0].Fence() {
			t.Fatalf("depth %d: fence %d, want the outer hold's %d", depth, l.Fence(), holds[0].Fence())
		}
		if h, err := r.Holder(a, "k"); err != nil || h.Count != depth || h.Owner != "owner-a" {
			t.Fatalf("depth %d: holder %+v, %v", depth, h, err)
		}
	}
	for i := 2; i >= 1; i-- {
		if err := holds[i].Release(a); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryObtain(b, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("another owner obtained with %d holds left: %v", i, err)
		}
	}
	if err := holds[0].Release(a); err != nil {
		t.Fatal(err)
	}
	l, err := r.TryObtain(b, "k", time.Second)
	if err != nil {
		t.Fatalf("after the last release: %v", err)
	}
	if l.Fence() <= holds[0].Fence() {
		t.Fatalf("new owner's fence %d not above %d", l.Fence(), holds[0].Fence())
	}
}

func TestReentrant_releaseByFormerOwner_failsAndChangesNothing(t *testing.T) {
	_, _, c := setup(t)
	r := c.Reentrant()
	a := lock.WithOwner(context.Background(), "a")
	b := lock.WithOwner(context.Background(), "b")
	stale, err := r.TryObtain(b, "k", 200*time.Millisecond, lock.WithoutRenewal())
	if err != nil {
		t.Fatal(err)
	}
	<-stale.Lost()
	time.Sleep(20 * time.Millisecond)
	held, err := r.TryObtain(a, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(a)

	if err := stale.Release(b); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("release by the former owner: %v, want ErrNotHeld", err)
	}
	h, err := r.Holder(a, "k")
	if err != nil || h.Owner != "a" || h.Count != 1 || h.TTL < 9*time.Second {
		t.Fatalf("the owner's hold was changed: %+v, %v", h, err)
	}
}

func TestReentrant_withoutOwner_mintsOneForNestedObtains(t *testing.T) {
	_, _, c := setup(t)
	r := c.Reentrant()
	ctx := context.Background()
	outer, err := r.Obtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(outer.Owner()) != 32 {
		t.Fatalf("minted owner %q, want 32 hex characters", outer.Owner())
	}
	owned := lock.WithOwner(ctx, outer.Owner())
	inner, err := r.TryObtain(owned, "k", time.Second)
	if err != nil {
		t.Fatalf("nested obtain with the minted owner: %v", err)
	}
	if _, err := r.TryObtain(ctx, "k", time.Second); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("a context without the owner obtained it: %v", err)
	}
	inner.Release(owned)
	outer.Release(owned)
}

func TestReentrant_watchdogAndLost_coverEveryNestedHold(t *testing.T) {
	_, rdb, c := setup(t)
	r := c.Reentrant()
	a := lock.WithOwner(context.Background(), "a")
	outer, err := r.TryObtain(a, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := r.TryObtain(a, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Release(a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the outer hold lives on through renewal
	if h, err := r.Holder(a, "k"); err != nil || h.Count != 1 {
		t.Fatalf("after 1s: %+v, %v", h, err)
	}
	again, err := r.TryObtain(a, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(context.Background(), "fs:rlock:{k}")
	waitClosed(t, outer.Lost(), time.Second, "outer hold's Lost")
	waitClosed(t, again.Lost(), time.Second, "nested hold's Lost")
}

func TestReentrant_otherOwnerWaits_thenGetsItWithAHigherFence(t *testing.T) {
	_, rdb, c := setup(t)
	a := lock.WithOwner(context.Background(), "a")
	held, err := c.Reentrant().TryObtain(a, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := newClient(t, rdb, lock.Config{RecheckInterval: noRecheck}).Reentrant()
	got := make(chan *lock.Lock, 1)
	go func() {
		l, err := waiter.Obtain(lock.WithOwner(context.Background(), "b"), "k", time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	if err := held.Release(a); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil || l.Fence() <= held.Fence() || l.Owner() != "b" {
			t.Fatalf("waiter's lock %+v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the last release")
	}
}

// An owner's second goroutine that had to wait queues behind its own
// owner's hold at the local gate, despite "the owner's obtains never queue
// behind its own hold".
func TestReentrant_ownersSecondWaiter_doesNotQueueBehindItsOwnHold(t *testing.T) {
	_, rdb, c := setup(t)
	x, err := newClient(t, rdb, lock.Config{}).Reentrant().TryObtain(lock.WithOwner(context.Background(), "x"), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Reentrant()
	o := lock.WithOwner(context.Background(), "o")
	got := make(chan *lock.Lock, 2)
	for range 2 {
		go func() {
			l, err := r.Obtain(o, "k", 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		time.Sleep(50 * time.Millisecond)
	}
	x.Release(context.Background())
	first := <-got
	select {
	case <-got:
	case <-time.After(time.Second):
		h, _ := r.Holder(o, "k")
		t.Errorf("owner o holds it (%+v) but its second Obtain is still queued locally after 1s", h)
	}
	first.Release(o)
}
