package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// 16 goroutines add 5,000 items each: every item is sent exactly once, no
// batch is over Max, and each goroutine's items arrive in its order.
func TestLoop_concurrentAdds_eachItemSentOnceInOrder(t *testing.T) {
	var mu sync.Mutex
	var got [][2]int
	biggest := 0
	l := New(func(_ context.Context, b [][2]int) ([][2]int, error) {
		mu.Lock()
		got = append(got, b...)
		biggest = max(biggest, len(b))
		mu.Unlock()
		return nil, nil
	}, Options{Max: 64})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				l.Add([2]int{g, i})
			}
		}()
	}
	wg.Wait()
	if left := l.Close(); len(left) != 0 {
		t.Fatalf("%d left after Close", len(left))
	}
	if len(got) != 16*5000 || biggest > 64 {
		t.Fatalf("sent %d items, biggest batch %d; want %d, at most 64", len(got), biggest, 16*5000)
	}
	next := make([]int, 16)
	for _, it := range got {
		if it[1] != next[it[0]] {
			t.Fatalf("goroutine %d: item %d sent when %d was due", it[0], it[1], next[it[0]])
		}
		next[it[0]]++
	}
}

// A send that fails puts its items back ahead of newer ones; the loop waits
// (MinBackoff) and sends them again, without a new Add to wake it.
func TestLoop_failedSend_retriedFirstAfterBackoff(t *testing.T) {
	var mu sync.Mutex
	var sent []int
	var calls []time.Time
	fail := 2
	l := New(func(_ context.Context, b []int) ([]int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if fail > 0 {
			fail--
			return b[1:], errors.New("down") // the first went, the rest did not
		}
		sent = append(sent, b...)
		return nil, nil
	}, Options{Max: 3, MinBackoff: 30 * time.Millisecond})
	l.Add(1, 2, 3, 4)
	deadline := time.Now().Add(5 * time.Second)
	for l.Pending() > 0 || func() bool { mu.Lock(); defer mu.Unlock(); return len(sent) < 2 }() {
		if time.Now().After(deadline) {
			t.Fatal("never sent after the failures")
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sent) != "[3 4]" {
		t.Fatalf("sent %v after two failures that each sent the first item; want [3 4]", sent)
	}
	if len(calls) < 3 || calls[1].Sub(calls[0]) < 25*time.Millisecond || calls[2].Sub(calls[1]) < 50*time.Millisecond {
		t.Fatalf("sends at %v: want a 30ms, then a 60ms wait", calls)
	}
}

// Over the backlog bound the oldest items are dropped and counted.
func TestLoop_backlog_dropsTheOldest(t *testing.T) {
	block := make(chan struct{})
	var sent []int
	dropped := 0
	l := New(func(_ context.Context, b []int) ([]int, error) {
		<-block
		sent = append(sent, b...)
		return nil, nil
	}, Options{Max: 1, Backlog: 3, Dropped: func(n int) { dropped += n }})
	l.Add(0) // taken by the blocked send
	for l.Pending() != 0 {
		time.Sleep(time.Millisecond)
	}
	l.Add(1, 2, 3)
	l.Add(4, 5)
	close(block)
	l.Close()
	if fmt.Sprint(sent) != "[0 3 4 5]" || dropped != 2 {
		t.Fatalf("sent %v, dropped %d; want [0 3 4 5] and 2", sent, dropped)
	}
}

// Close sends what waits, retrying, for up to the drain time; what it could
// not send it returns. Afterwards Add refuses.
func TestLoop_close_drainsThenReturnsWhatItCouldNotSend(t *testing.T) {
	var sent []int
	l := New(func(_ context.Context, b []int) ([]int, error) { sent = append(sent, b...); return nil, nil }, Options{})
	l.Add(1, 2, 3)
	if left := l.Close(); len(left) != 0 || !slices.Equal(sent, []int{1, 2, 3}) {
		t.Fatalf("Close sent %v, left %v", sent, left)
	}
	if l.Add(4) {
		t.Fatal("Add after Close took an item")
	}
	if l.Close() != nil {
		t.Fatal("a second Close returned items")
	}

	tries := 0
	down := New(func(_ context.Context, b []int) ([]int, error) { tries++; return b, errors.New("down") },
		Options{MinBackoff: 10 * time.Millisecond, Drain: 100 * time.Millisecond})
	down.Add(7, 8)
	start := time.Now()
	left := down.Close()
	if took := time.Since(start); !slices.Equal(left, []int{7, 8}) || tries < 3 || took > 2*time.Second {
		t.Fatalf("Close with every send failing: left %v after %d tries in %v; want [7 8], several tries, ~100ms", left, tries, took)
	}
}

// With Linger, items added within it go in one batch; Max items waiting end
// the linger early; Close during a linger sends at once, not after it.
func TestLoop_linger_gathersUntilItEndsOrMaxOrClose(t *testing.T) {
	type sent struct {
		items []int
		at    time.Time
	}
	record := func(ch chan sent) Send[int] {
		return func(_ context.Context, b []int) ([]int, error) {
			ch <- sent{slices.Clone(b), time.Now()}
			return nil, nil
		}
	}

	ch := make(chan sent, 10)
	l := New(record(ch), Options{Max: 100, Linger: 300 * time.Millisecond})
	start := time.Now()
	for i := range 3 {
		l.Add(i)
		time.Sleep(20 * time.Millisecond)
	}
	s := <-ch
	if !slices.Equal(s.items, []int{0, 1, 2}) || s.at.Sub(start) < 300*time.Millisecond {
		t.Fatalf("lingering 300ms: sent %v after %v; want [0 1 2], after 300ms", s.items, s.at.Sub(start))
	}
	l.Close()

	ch = make(chan sent, 10)
	l = New(record(ch), Options{Max: 4, Linger: time.Hour})
	start = time.Now()
	l.Add(1, 2)
	l.Add(3, 4, 5)
	s = <-ch
	if !slices.Equal(s.items, []int{1, 2, 3, 4}) || s.at.Sub(start) > 10*time.Second {
		t.Fatalf("Max 4 reached: sent %v after %v; want [1 2 3 4] at once", s.items, s.at.Sub(start))
	}

	// 5 is left, lingering for an hour: Close sends it now.
	closed := make(chan []int)
	go func() { closed <- l.Close() }()
	select {
	case s = <-ch:
		if !slices.Equal(s.items, []int{5}) {
			t.Fatalf("Close sent %v; want [5]", s.items)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the linger")
	}
	if left := <-closed; len(left) != 0 {
		t.Fatalf("Close left %v", left)
	}
}

// A send in flight when Close is called is bounded by the drain time too:
// its ctx ends when the drain time is over, and what it did not send Close
// returns.
func TestLoop_close_endsASendInFlightAfterTheDrainTime(t *testing.T) {
	sending := make(chan struct{})
	l := New(func(ctx context.Context, b []int) ([]int, error) {
		close(sending)
		<-ctx.Done() // a send stuck on a dead peer, until its ctx ends
		return b, ctx.Err()
	}, Options{Drain: 200 * time.Millisecond})
	l.Add(1, 2, 3)
	<-sending
	start := time.Now()
	closed := make(chan []int, 1)
	go func() { closed <- l.Close() }()
	select {
	case left := <-closed:
		// 200ms of drain; the margin is for a loaded machine.
		if took := time.Since(start); !slices.Equal(left, []int{1, 2, 3}) || took > 3*time.Second {
			t.Fatalf("Close returned %v after %v; want [1 2 3] after ~200ms", left, took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits for the send in flight 10s after a 200ms drain time")
	}
}
