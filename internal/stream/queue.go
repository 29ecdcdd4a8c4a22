package stream

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// The waiting room's streams (GET /v1/activities/{id}/queue/events;
// docs/waiting-room.md "The streams", docs/streams.md): a shopper's place,
// pushed. A place is ticket − serving; the ticket is the shopper's (read
// once, at connect), the serving counter the sale's. So a process runs one
// watcher per sale it has streams of: every Tick it reads the sale's
// counters (waitingroom.Service.Counters, one script, which advances the
// counter as a poll would) and hands them to each stream, which computes its
// place itself. Redis sees one script a tick per sale and process, nothing
// per stream while it waits; a stream costs one Read at connect and one
// when the counter passes its ticket (the Read that records the admission
// and signs its token). The watcher also holds the sale's hub topic
// (QueueTopic): a publish there (Publisher.NudgeQueue: a close, a new rate)
// makes it read at once rather than at the next tick.

// QueueTopic is the hub topic of sale's waiting room's streams.
func QueueTopic(sale int64) string { return "queue:" + strconv.FormatInt(sale, 10) }

// NudgeQueue tells every api's watcher of sale to read its counters now
// (the sale closed, its rate changed): one PUBLISH.
func (p *Publisher) NudgeQueue(ctx context.Context, sale int64) error {
	return p.PublishItems(ctx, []Item{{Topics: []string{QueueTopic(sale)}, Name: "queue"}})
}

// Room is what the queue streams need of the waiting rooms
// (waitingroom.Service).
type Room interface {
	Read(ctx context.Context, sale, user int64) (waitingroom.Place, error)
	Counters(ctx context.Context, sale int64) (waitingroom.Counters, error)
}

// QueueConfig tunes Queue. The zero value gives the defaults.
type QueueConfig struct {
	// Tick is how often a sale's watcher reads its counters. Default 250 ms:
	// a sell-out or a close reaches the streams within it.
	Tick time.Duration
	// MinGap is the least time between two updates of a waiting shopper's
	// position (an admission, a sell-out, a close go at once). Default 1 s.
	MinGap time.Duration
	// ReadTimeout bounds one Redis read. Default 3 s.
	ReadTimeout time.Duration
	// Log gets the counters' read failures; nil: slog's default.
	Log *slog.Logger
}

// Queue opens the waiting room's streams on a hub.
type Queue struct {
	hub  *Hub
	room Room
	cfg  QueueConfig
	log  *slog.Logger

	mu     sync.Mutex
	sales  map[int64]*saleWatch
	closed bool

	open     atomic.Int64 // streams open
	counters atomic.Int64 // counters read, ever
	nudges   atomic.Int64 // hub items received, ever
}

// NewQueue returns the queue streams of room, nudged through hub.
func NewQueue(hub *Hub, room Room, cfg QueueConfig) *Queue {
	if cfg.Tick <= 0 {
		cfg.Tick = 250 * time.Millisecond
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 3 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &Queue{hub: hub, room: room, cfg: cfg, log: log, sales: map[int64]*saleWatch{}}
}

type saleWatch struct {
	sale    int64
	streams map[*QueueStream]struct{}
}

// QueueStream is one shopper's stream of their place.
type QueueStream struct {
	q          *Queue
	sale, user int64
	place      waitingroom.Place // the last sent (or to send first)
	pending    bool              // place not sent yet
	final      bool              // place is the last
	sentAt     time.Time
	updates    chan waitingroom.Counters // the latest only
	done       chan struct{}
	err        error // why done closed (under q.mu)
	closeOnce  sync.Once
}

// Open reads user's place in sale's queue (errors: Room.Read's, ErrClosed)
// and returns its stream: the place first, then its changes.
func (q *Queue) Open(ctx context.Context, sale, user int64) (*QueueStream, error) {
	p, err := q.room.Read(ctx, sale, user)
	if err != nil {
		return nil, err
	}
	s := &QueueStream{q: q, sale: sale, user: user, place: p, pending: true,
		updates: make(chan waitingroom.Counters, 1), done: make(chan struct{})}
	if p.Status != waitingroom.Waiting {
		s.final = true
		return s, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, ErrClosed
	}
	w := q.sales[sale]
	if w == nil {
		w = &saleWatch{sale: sale, streams: map[*QueueStream]struct{}{}}
		q.sales[sale] = w
		go q.watch(w)
	}
	w.streams[s] = struct{}{}
	q.open.Add(1)
	return s, nil
}

// Close ends the stream (the client went away). Idempotent.
func (s *QueueStream) Close() {
	s.closeOnce.Do(func() {
		q := s.q
		q.mu.Lock()
		defer q.mu.Unlock()
		if w := q.sales[s.sale]; w != nil {
			if _, ok := w.streams[s]; ok {
				delete(w.streams, s)
				q.open.Add(-1)
			}
		}
	})
}

// endLocked ends s with err (q.mu held).
func (q *Queue) endLocked(w *saleWatch, s *QueueStream, err error) {
	if _, ok := w.streams[s]; !ok {
		return
	}
	delete(w.streams, s)
	q.open.Add(-1)
	s.err = err
	close(s.done)
}

// Next is the stream's next place to send; ok false when tick fired first
// (a heartbeat is due). Errors: ErrEnded after the last place, ErrClosed
// at shutdown, ctx's, or a Read's (the admission lapsed).
func (s *QueueStream) Next(ctx context.Context, tick <-chan time.Time) (waitingroom.Place, bool, error) {
	if s.pending {
		s.pending, s.sentAt = false, time.Now()
		return s.place, true, nil
	}
	if s.final {
		return waitingroom.Place{}, false, ErrEnded
	}
	for {
		select {
		case <-ctx.Done():
			return waitingroom.Place{}, false, ctx.Err()
		case <-tick:
			return waitingroom.Place{}, false, nil
		case <-s.done:
			s.q.mu.Lock()
			err := s.err
			s.q.mu.Unlock()
			return waitingroom.Place{}, false, err
		case c := <-s.updates:
			p, send, err := s.apply(ctx, c)
			if err != nil {
				return waitingroom.Place{}, false, err
			}
			if send {
				s.place, s.sentAt = p, time.Now()
				return p, true, nil
			}
		}
	}
}

// apply is the place counters c make, and whether it is worth sending.
func (s *QueueStream) apply(ctx context.Context, c waitingroom.Counters) (waitingroom.Place, bool, error) {
	cur := s.place
	switch {
	case c.Status == "": // before the start: no position yet
		return cur, false, nil
	case c.Status == waitingroom.SoldOut || c.Status == waitingroom.Closed:
		p := waitingroom.Place{Status: c.Status, Ticket: cur.Ticket, Position: max(cur.Ticket-c.Serving, 0),
			EstimatedWait: -1, PollAfter: waitingroom.MaxPoll / 3}
		if c.Status == waitingroom.Closed {
			p.Ticket, p.Position, p.PollAfter = 0, 0, 0
		}
		s.final = true
		return p, true, nil
	case cur.Ticket == 0 || cur.Ticket <= c.Serving:
		// The start made the ticket final, or the counter passed it: the
		// shopper's own read (which records the admission and signs it).
		rctx, cancel := context.WithTimeout(ctx, s.q.cfg.ReadTimeout)
		p, err := s.q.room.Read(rctx, s.sale, s.user)
		cancel()
		if err != nil {
			return cur, false, err
		}
		if p.Status != waitingroom.Waiting {
			s.final = true
			return p, true, nil
		}
		return p, p.Position != cur.Position, nil
	}
	p := waitingroom.WaitingPlace(cur.Ticket, cur.Ticket-c.Serving, c.RateMilli)
	return p, p.Position != cur.Position && time.Since(s.sentAt) >= s.q.cfg.MinGap, nil
}

// watch serves sale's streams until it has none: the counters every tick
// or nudge, to every stream.
func (q *Queue) watch(w *saleWatch) {
	tick := time.NewTicker(q.cfg.Tick)
	defer tick.Stop()
	var sub *Subscription
	defer func() {
		if sub != nil {
			sub.Close()
		}
	}()
	for {
		if sub == nil {
			var err error
			if sub, err = q.hub.Subscribe(QueueTopic(w.sale)); err != nil {
				q.shutdown(err)
				return
			}
		}
		var subDone <-chan struct{} = sub.Done()
		select {
		case <-tick.C:
		case <-sub.Items():
			q.nudges.Add(1)
		case <-sub.Resync():
		case <-subDone:
			if errors.Is(sub.Err(), ErrClosed) {
				q.shutdown(ErrClosed)
				return
			}
			sub = nil // dropped: subscribe again
		}
		q.mu.Lock()
		if len(w.streams) == 0 {
			delete(q.sales, w.sale)
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), q.cfg.ReadTimeout)
		c, err := q.room.Counters(ctx, w.sale)
		cancel()
		q.counters.Add(1)
		if errors.Is(err, activity.ErrNotOnSale) {
			c, err = waitingroom.Counters{Status: waitingroom.Closed}, nil // deleted or drafted again
		}
		if err != nil {
			q.log.Warn("stream: a waiting room's counters not read; the streams wait", "sale", w.sale, "err", err)
			continue
		}
		q.mu.Lock()
		for s := range w.streams {
			select {
			case <-s.updates: // an older one not taken yet: this replaces it
			default:
			}
			s.updates <- c
		}
		q.mu.Unlock()
	}
}

// shutdown ends every stream with err, and refuses new ones.
func (q *Queue) shutdown(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, w := range q.sales {
		for s := range w.streams {
			q.endLocked(w, s, err)
		}
	}
}

// QueueStats are the queue streams' figures.
type QueueStats struct {
	Open     int   // streams open
	Sales    int   // sales watched
	Counters int64 // counters read, ever
}

// Stats returns the queue streams' figures now.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	n := len(q.sales)
	q.mu.Unlock()
	return QueueStats{Open: int(q.open.Load()), Sales: n, Counters: q.counters.Load()}
}

// Collectors are the streams' metrics for the api's registry: the hub's
// (Hub.Stats) and, if q is not nil, the queue streams'.
func Collectors(h *Hub, q *Queue) []prometheus.Collector {
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashsale_stream_subscribers",
			Help: "Hub subscriptions open: the order streams' (one each) and the queue streams' watchers (one a sale)."},
			func() float64 { return float64(h.Stats().Subscribers) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_stream_dropped_total",
			Help: "Hub subscribers dropped for falling behind (their clients reconnect)."},
			func() float64 { return float64(h.Stats().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_stream_shard_subscriptions_total",
			Help: "The hub's shard subscriptions established: one per shard at start, one more per resubscription after a loss."},
			func() float64 { return float64(h.Stats().Subscribed) }),
	}
	if q != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flashsale_waitingroom_streams_open",
				Help: "Waiting room streams open (GET /v1/activities/{id}/queue/events)."},
				func() float64 { return float64(q.Stats().Open) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "flashsale_waitingroom_stream_counter_reads_total",
				Help: "Waiting rooms' counters read for the streams: one a tick per sale with streams, whatever their number."},
				func() float64 { return float64(q.Stats().Counters) }),
		)
	}
	return cs
}
