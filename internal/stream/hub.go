package stream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
)

// The errors a subscription ends with (Subscription.Err) and the hub
// refuses with.
var (
	// ErrClosed: the hub is closed (the api is shutting down).
	ErrClosed = errors.New("stream: closed")
	// ErrDropped: the subscriber fell Config.Buffer items behind and was
	// dropped so that it would not hold the others up; its client
	// reconnects, with Last-Event-ID, and is served from the durable record.
	ErrDropped = errors.New("stream: subscriber too slow, dropped")
	// ErrUnavailable: Redis did not take a publish.
	ErrUnavailable = errors.New("stream: unavailable")
)

// Config tunes a Hub. The zero value gives the defaults.
type Config struct {
	// Buffer is how many items a subscriber may fall behind before it is
	// dropped (ErrDropped). Default 16: an order has at most four events
	// (and a duplicate or two from a worker's retry), and the buffer is
	// allocated whole with each subscription (16 items are 1.8 KB; 64 were
	// 7 KB of every stream's memory).
	Buffer int
	// PingEvery is how long a shard's subscription may be silent before the
	// hub sends a PING on it to find out whether it is still alive (one per
	// shard, not per subscriber; a dead connection is found by the second
	// silence). Default 30 s.
	PingEvery time.Duration
	// Log gets the subscriptions' losses and recoveries; nil: slog's default.
	Log *slog.Logger
}

// Hub is an api process's side: one Redis subscription per shard
// (rediskeys.StreamShards of them, each on its own connection), and the
// process's subscribers by topic. Dispatching never blocks on a
// subscriber.
type Hub struct {
	rdb     redis.UniversalClient
	sharded bool
	cfg     Config
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	topics map[string]map[*Subscription]struct{}
	closed bool
	pss    [rediskeys.StreamShards]*redis.PubSub // the shards' current subscriptions

	dropped    atomic.Int64
	subscribed atomic.Int64
}

// NewHub starts a hub on rdb: it subscribes to every shard at once, and
// again after any loss, until Close.
func NewHub(rdb redis.UniversalClient, cfg Config) *Hub {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 16
	}
	if cfg.PingEvery <= 0 {
		cfg.PingEvery = 30 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	_, sharded := rdb.(*redis.ClusterClient)
	h := &Hub{rdb: rdb, sharded: sharded, cfg: cfg, log: log, topics: map[string]map[*Subscription]struct{}{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for s := range rediskeys.StreamShards {
		h.wg.Add(1)
		go h.run(s)
	}
	return h
}

// Subscription is one subscriber of one topic.
type Subscription struct {
	hub    *Hub
	topic  string
	shard  int
	items  chan Item
	resync chan struct{}
	done   chan struct{}
	err    error // set before done closes (under hub.mu)
}

// Items are the topic's items, in the order the hub received them.
func (s *Subscription) Items() <-chan Item { return s.items }

// Resync receives after the shard's subscription was established again
// (Redis restarted, the connection was lost): items published meanwhile
// were not received, and the subscriber reads what it missed from the
// durable record.
func (s *Subscription) Resync() <-chan struct{} { return s.resync }

// Done closes when the hub ended the subscription: Err says why.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended (ErrDropped, ErrClosed), or nil.
func (s *Subscription) Err() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.err
}

// Close ends the subscription (the client went away). Idempotent.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(s, nil)
}

// Subscribe subscribes to topic; ErrClosed once the hub is closed.
// Subscribe before reading the durable record, so that nothing committed
// in between is missed (the subscriber skips what it then sees twice).
func (h *Hub) Subscribe(topic string) (*Subscription, error) {
	s := &Subscription{hub: h, topic: topic, shard: ShardOf(topic), items: make(chan Item, h.cfg.Buffer),
		resync: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	subs := h.topics[topic]
	if subs == nil {
		subs = map[*Subscription]struct{}{}
		h.topics[topic] = subs
	}
	subs[s] = struct{}{}
	return s, nil
}

// endLocked removes s and closes its Done with err; h.mu is held.
func (h *Hub) endLocked(s *Subscription, err error) {
	subs, ok := h.topics[s.topic]
	if !ok {
		return
	}
	if _, ok := subs[s]; !ok {
		return
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(h.topics, s.topic)
	}
	s.err = err
	close(s.done)
}

// Stats are the hub's figures.
type Stats struct {
	Subscribers int   // open subscriptions
	Topics      int   // topics with at least one
	Dropped     int64 // subscribers dropped for being too slow, ever
	// Subscribed counts the shards' subscriptions established, ever:
	// rediskeys.StreamShards at start, one more each time one comes back
	// after a loss.
	Subscribed int64
}

// Stats returns the hub's figures now.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, subs := range h.topics {
		n += len(subs)
	}
	return Stats{Subscribers: n, Topics: len(h.topics), Dropped: h.dropped.Load(), Subscribed: h.subscribed.Load()}
}

// Close ends every subscription (ErrClosed: the streams end and their
// clients reconnect, to another api) and the shards' Redis subscriptions.
// The api calls it when its HTTP server starts shutting down.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for _, subs := range h.topics {
		for s := range subs {
			h.endLocked(s, ErrClosed)
		}
	}
	h.cancel()
	for _, ps := range h.pss {
		if ps != nil {
			_ = ps.Close() // unblocks its receive
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// dispatch hands a message's items to their topics' subscribers, never
// waiting: a subscriber whose buffer is full is dropped.
//
// Many messages are for no stream of this process: every api receives
// every order's events (a fixed set of channels, docs/streams.md), and at a
// launch few shoppers may hold an order's stream open. Decoding each message
// whole was 6% of an api's CPU at a launch with no stream open (a profile of
// fresh shoppers' orders, the worker publishing): a process with no
// subscriber decodes nothing (BenchmarkDispatch). Reading a message's
// topics first, to skip those for no subscriber here, was tried and not
// kept: a second scan of every message that had one cost more than the
// skips saved where streams are open. Skipping
// loses nothing: a subscriber subscribes before it reads the durable
// record, and a message is published after its commit, so what one missed
// by subscribing just after is in the record it reads.
func (h *Hub) dispatch(payload string) {
	h.mu.Lock()
	none := len(h.topics) == 0
	h.mu.Unlock()
	if none {
		return
	}
	var items []Item
	if err := json.Unmarshal([]byte(payload), &items); err != nil {
		h.log.Warn("stream: a message that does not decode; ignored", "err", err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		for _, t := range it.Topics {
			for s := range h.topics[t] {
				select {
				case s.items <- it:
				default:
					h.dropped.Add(1)
					h.endLocked(s, ErrDropped)
				}
			}
		}
	}
}

// resyncShard tells every subscriber of shard that it may have missed
// items.
func (h *Hub) resyncShard(shard int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.topics {
		for s := range subs {
			if s.shard != shard {
				continue
			}
			select {
			case s.resync <- struct{}{}:
			default: // one pending already says it
			}
		}
	}
}

// run keeps shard's subscription up until the hub closes: subscribe, serve,
// and after a loss wait (100 ms doubling to 5 s) and subscribe again.
func (h *Hub) run(shard int) {
	defer h.wg.Done()
	ch := rediskeys.StreamChannel(shard)
	backoff := 100 * time.Millisecond
	for h.ctx.Err() == nil {
		var ps *redis.PubSub
		if h.sharded {
			ps = h.rdb.SSubscribe(h.ctx, ch)
		} else {
			ps = h.rdb.Subscribe(h.ctx, ch)
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = ps.Close()
			return
		}
		h.pss[shard] = ps
		h.mu.Unlock()
		established, err := h.serve(ps, shard)
		_ = ps.Close()
		if h.ctx.Err() != nil {
			return
		}
		if established {
			backoff = 100 * time.Millisecond
			h.log.Warn("stream: shard subscription lost; subscribing again", "channel", ch, "err", err)
		} else {
			h.log.Debug("stream: shard not subscribed; trying again", "channel", ch, "in", backoff, "err", err)
		}
		select {
		case <-h.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// serve receives on ps until it fails; established says whether it was
// subscribed at all.
func (h *Hub) serve(ps *redis.PubSub, shard int) (established bool, err error) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(h.ctx, h.cfg.PingEvery)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && established {
				// Silence: ask, and expect the PONG within the next wait.
				if err := ps.Ping(h.ctx); err != nil {
					return established, err
				}
				pinged = true
				continue
			}
			return established, err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				established = true
				h.subscribed.Add(1)
				// Whatever was published while it was down is in the
				// durable record: every subscriber of the shard reads it.
				h.resyncShard(shard)
			}
		case *redis.Message:
			h.dispatch(m.Payload)
		}
	}
}
