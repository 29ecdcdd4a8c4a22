package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waiting for a held lock has two layers.
//
// In this process, waiters of one key queue at a gate: a one-slot semaphore
// whose blocked senders the Go runtime serves in arrival order. Only the
// gate's holder talks to Redis, and it keeps the gate for as long as it holds
// the lock, so N local waiters cost Redis nothing while a local holder works,
// and a local handoff is one release and one obtain.
//
// Across processes, the gate's holder subscribes to the key's release channel
// (one shared pub/sub connection per Client) before its next attempt, then
// sleeps until a release is published, the holder's ttl runs out, or the
// recheck interval passes. Subscribing before the attempt closes the race
// where a release lands between a failed attempt and the wait.

// gateSet holds one gate per key that has local waiters or a local holder.
type gateSet struct {
	mu    sync.Mutex
	gates map[string]*gate
}

type gate struct {
	slot chan struct{}
	refs int // goroutines waiting at or holding the gate
}

// enter waits for the key's gate. It returns a func that leaves the gate; it
// must be called exactly once.
func (s *gateSet) enter(ctx context.Context, key string) (leave func(), err error) {
	s.mu.Lock()
	if s.gates == nil {
		s.gates = make(map[string]*gate)
	}
	g := s.gates[key]
	if g == nil {
		g = &gate{slot: make(chan struct{}, 1)}
		s.gates[key] = g
	}
	g.refs++
	s.mu.Unlock()

	select {
	case g.slot <- struct{}{}:
		return func() {
			<-g.slot
			s.unref(key, g)
		}, nil
	case <-ctx.Done():
		s.unref(key, g)
		return nil, ctx.Err()
	}
}

func (s *gateSet) unref(key string, g *gate) {
	s.mu.Lock()
	g.refs--
	if g.refs == 0 {
		delete(s.gates, key)
	}
	s.mu.Unlock()
}

// notifier multiplexes release notices for many keys over one pub/sub
// connection, opened on first contention.
type notifier struct {
	rdb    redis.UniversalClient
	linger time.Duration

	mu     sync.Mutex
	ps     *redis.PubSub
	subs   map[string]*subscription
	closed bool
}

// subscription is one channel's listeners in this process.
type subscription struct {
	channel string
	ready   chan struct{} // closed when Redis confirmed the SUBSCRIBE
	wake    chan struct{} // one pending notice
	refs    int
	idle    *time.Timer // unsubscribes after linger without listeners
}

func (s *subscription) drain() {
	select {
	case <-s.wake:
	default:
	}
}

func (s *subscription) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func newNotifier(rdb redis.UniversalClient, linger time.Duration) *notifier {
	return &notifier{rdb: rdb, linger: linger, subs: make(map[string]*subscription)}
}

var errClosed = errors.New("lock: client closed")

// subscribe listens on channel and waits until Redis confirms it, or up to
// maxWait: a confirmation that is slow only risks a missed notice, which the
// caller's bounded recheck covers.
func (n *notifier) subscribe(ctx context.Context, channel string, maxWait time.Duration) (*subscription, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	if n.ps == nil {
		n.ps = n.rdb.Subscribe(context.WithoutCancel(ctx))
		go n.dispatch(n.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	}
	s := n.subs[channel]
	if s == nil {
		s = &subscription{channel: channel, ready: make(chan struct{}), wake: make(chan struct{}, 1)}
		// SUBSCRIBE is sent under n.mu so that it is ordered with any
		// UNSUBSCRIBE of the same channel.
		if err := n.ps.Subscribe(ctx, channel); err != nil {
			n.mu.Unlock()
			return nil, err
		}
		n.subs[channel] = s
	}
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.refs++
	n.mu.Unlock()

	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-s.ready:
	case <-t.C:
	case <-ctx.Done():
		n.unsubscribe(s)
		return nil, ctx.Err()
	}
	return s, nil
}

// unsubscribe drops one listener; the channel stays subscribed for linger in
// case another waiter comes.
func (n *notifier) unsubscribe(s *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s.refs--
	if s.refs > 0 || n.closed {
		return
	}
	s.idle = time.AfterFunc(n.linger, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if s.refs > 0 || n.closed || n.subs[s.channel] != s {
			return
		}
		delete(n.subs, s.channel)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.ps.Unsubscribe(ctx, s.channel)
	})
}

// dispatch turns pub/sub traffic into wake-ups. A (re)confirmed subscription
// also wakes its listener: after a reconnect, releases published while the
// connection was down were lost, so the waiter should look again.
func (n *notifier) dispatch(msgs <-chan any) {
	for m := range msgs {
		var channel string
		confirm := false
		switch m := m.(type) {
		case *redis.Message:
			channel = m.Channel
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			channel, confirm = m.Channel, true
		default:
			continue
		}
		n.mu.Lock()
		s := n.subs[channel]
		if s != nil {
			if confirm {
				select {
				case <-s.ready:
					s.poke() // a resubscription after reconnect
				default:
					close(s.ready)
				}
			} else {
				s.poke()
			}
		}
		n.mu.Unlock()
	}
}

func (n *notifier) close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	for _, s := range n.subs {
		if s.idle != nil {
			s.idle.Stop()
		}
	}
	if n.ps != nil {
		return n.ps.Close()
	}
	return nil
}
