package lock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Release notices: a waiter that talks to Redis (a gate's head) subscribes
// to the key's release channel before its next attempt, then sleeps until a
// release is published, the holder's ttl runs out, or the recheck interval
// passes. Subscribing before the attempt closes the race where a release
// lands between a failed attempt and the wait. One pub/sub connection per
// Client carries every key's channel.

// notifier multiplexes release notices for many keys over one pub/sub
// connection, opened on first contention. SUBSCRIBE and UNSUBSCRIBE are sent
// under n.mu so that they stay ordered per channel; the price is that one
// slow (re)connect holds up other keys' subscribes, bounded by the client's
// dial and write timeouts.
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
	// wake holds one pending notice for the listeners that share it: each
	// notice wakes one of them (see Client.waitFor).
	wake chan struct{}
	refs int
	idle *time.Timer // unsubscribes after linger without listeners
	// watchers wake one listener each, by message payload (the fair lock
	// publishes the granted waiter's token); anyWatchers wake on every
	// message (Redlock merges several nodes' notices). Guarded by notifier.mu.
	watchers    map[string]chan struct{}
	anyWatchers map[chan struct{}]bool
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watch returns a channel that is poked when a message with payload
// arrives on s.
func (n *notifier) watch(s *subscription, payload string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s.watchers == nil {
		s.watchers = make(map[string]chan struct{})
	}
	ch := make(chan struct{}, 1)
	s.watchers[payload] = ch
	return ch
}

// passOn hands a notice to the next listener of s, if any: a waiter that got
// the lock after a notice lets the others look again (the reentrant owner's
// other goroutines get it at once).
func (n *notifier) passOn(s *subscription) {
	n.mu.Lock()
	others := s.refs > 1
	n.mu.Unlock()
	if others {
		poke(s.wake)
	}
}

// watchAny pokes ch on every message on s, until unwatchAny.
func (n *notifier) watchAny(s *subscription, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s.anyWatchers == nil {
		s.anyWatchers = make(map[chan struct{}]bool)
	}
	s.anyWatchers[ch] = true
}

func (n *notifier) unwatchAny(s *subscription, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(s.anyWatchers, ch)
}

func (n *notifier) unwatch(s *subscription, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(s.watchers, payload)
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
			// go-redis records the channel even when SUBSCRIBE fails, and
			// would resubscribe it on every reconnect: take it back.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = n.ps.Unsubscribe(ctx, channel)
			cancel()
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
		var channel, payload string
		confirm := false
		switch m := m.(type) {
		case *redis.Message:
			channel, payload = m.Channel, m.Payload
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
					// A resubscription after a reconnect: notices sent
					// meanwhile are lost, so everyone should look again.
					poke(s.wake)
					for _, w := range s.watchers {
						poke(w)
					}
					for w := range s.anyWatchers {
						poke(w)
					}
				default:
					close(s.ready)
				}
			} else {
				poke(s.wake)
				if w := s.watchers[payload]; w != nil {
					poke(w)
				}
				for w := range s.anyWatchers {
					poke(w)
				}
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
