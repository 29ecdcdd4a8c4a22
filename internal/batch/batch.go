// Package batch gathers items that many goroutines add and hands them to
// one sender in batches: the "gather, take up to N, send, repeat" loop
// behind the order path's auto-pipelining (redispipe), the api's task
// relay, and the worker's MySQL writer. Each of those keeps its own send and
// failure rule; this package owns only the loop.
//
// By default there is no timer and no linger: an idle loop sends an item
// at once, and while one send is in flight the next batch gathers, so a busy
// loop sends few large batches. A loop whose every send has a fixed cost
// that matters more than its latency (the task relay: each batch is asynq
// tasks to enqueue, dequeue and complete) can linger (Options.Linger).
package batch

import (
	"context"
	"sync"
	"time"
)

// Send sends one batch. It returns the items to send again, put back ahead
// of everything added since (nil when all were sent or answered), and an
// error; after an error the loop waits before it sends again (Options).
// ctx ends when Close's drain time is over, for a send already in flight
// when Close was called too: a send that returns only when its ctx ends
// puts back what it did not send, and Close returns that.
type Send[T any] func(ctx context.Context, batch []T) (again []T, err error)

// Options tune a Loop. The zero value gives the defaults in the comments.
type Options struct {
	// Max bounds one batch. Default 100.
	Max int
	// Backlog bounds the items waiting; Add then drops the oldest and tells
	// Dropped how many. Default 0: unbounded.
	Backlog int
	// Dropped is told how many items the Backlog bound dropped.
	Dropped func(n int)
	// MinBackoff and MaxBackoff bound the wait after a failed send, which
	// doubles from the one to the other while sends keep failing. Defaults
	// 50ms and 2s.
	MinBackoff, MaxBackoff time.Duration
	// Drain bounds how long Close keeps sending what is waiting, counted
	// from the call: a send in flight then is bounded by it too (its ctx
	// ends). Default 5s.
	Drain time.Duration
	// Linger is how long the loop waits, once something was added, for
	// more before it sends, unless Max items are waiting first or Close is
	// called. Default 0: send at once.
	Linger time.Duration
}

// Loop is a batching loop; New starts it.
type Loop[T any] struct {
	send Send[T]
	o    Options

	mu     sync.Mutex
	items  []T
	closed bool

	wake chan struct{} // cap 1: something was added
	// ctx is every send's; cancel ends it when Close's drain time is over.
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{}
	stopped chan struct{}
	left    []T // what Close could not send
}

// New starts a loop that hands batches to send, one at a time, from its own
// goroutine.
func New[T any](send Send[T], o Options) *Loop[T] {
	if o.Max <= 0 {
		o.Max = 100
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(2*time.Second, o.MinBackoff)
	}
	if o.Drain <= 0 {
		o.Drain = 5 * time.Second
	}
	l := &Loop[T]{send: send, o: o, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
}

// Add queues items for the next batches and returns at once. After Close it
// takes nothing and returns false: the caller sends by itself or gives up.
func (l *Loop[T]) Add(items ...T) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.items = append(l.items, items...)
	dropped := 0
	if l.o.Backlog > 0 {
		if dropped = len(l.items) - l.o.Backlog; dropped > 0 {
			l.items = append(l.items[:0:0], l.items[dropped:]...)
		}
	}
	l.mu.Unlock()
	if dropped > 0 && l.o.Dropped != nil {
		l.o.Dropped(dropped)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// Pending is how many items wait to be sent.
func (l *Loop[T]) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Close stops taking items, sends what is waiting (retrying failed sends)
// for up to the drain time, stops the loop, and returns what it could not
// send. Calling it again returns nothing.
func (l *Loop[T]) Close() []T {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.stopped
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	// The drain time runs from here, so it bounds a send in flight now too:
	// before, such a send had a context that never ended, and Close waited
	// for it as long as it took.
	over := time.AfterFunc(l.o.Drain, l.cancel)
	close(l.stop)
	<-l.stopped
	over.Stop()
	l.cancel()
	return l.left
}

func (l *Loop[T]) run() {
	defer close(l.stopped)
	backoff := l.o.MinBackoff
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			l.drain()
			return
		}
		if !l.linger() {
			l.drain()
			return
		}
		err := l.sendAll(l.ctx)
		if err == nil {
			backoff = l.o.MinBackoff
			continue
		}
		select {
		case <-time.After(backoff):
			backoff = min(2*backoff, l.o.MaxBackoff)
			select { // try again even if nothing new arrives
			case l.wake <- struct{}{}:
			default:
			}
		case <-l.stop:
			l.drain()
			return
		}
	}
}

// linger waits up to Options.Linger for a full batch; false when Close was
// called meanwhile.
func (l *Loop[T]) linger() bool {
	if l.o.Linger <= 0 {
		return true
	}
	t := time.NewTimer(l.o.Linger)
	defer t.Stop()
	for l.Pending() < l.o.Max {
		select {
		case <-l.wake:
		case <-t.C:
			return true
		case <-l.stop:
			return false
		}
	}
	return true
}

// sendAll sends batches until none is left or a send fails.
func (l *Loop[T]) sendAll(ctx context.Context) error {
	for ctx.Err() == nil {
		l.mu.Lock()
		n := min(len(l.items), l.o.Max)
		batch := l.items[:n:n]
		l.items = l.items[n:]
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		again, err := l.send(ctx, batch)
		if len(again) > 0 {
			l.mu.Lock()
			l.items = append(again[:len(again):len(again)], l.items...)
			l.mu.Unlock()
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// drain sends what is left, retrying with backoff, until the drain time is
// over (l.ctx ends); what is still waiting then is kept for Close to return.
func (l *Loop[T]) drain() {
	ctx := l.ctx
	backoff := l.o.MinBackoff
	for l.sendAll(ctx) != nil {
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
			backoff = min(2*backoff, l.o.MaxBackoff)
			continue
		}
		break
	}
	l.mu.Lock()
	l.left, l.items = l.items, nil
	l.mu.Unlock()
}
