package waitingroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// The poll's fast path (docs/waiting-room.md, "A poll's cost"): most polls
// of a crowd change nothing in Redis (the serving counter moves at most once
// in queue.lua's queue_step, 10 ms, and a waiting shopper's place is only
// read), yet queue.lua paid for a script call, TIME, an HMGET of 13 fields
// and the string work around them. Read answers those polls from one
// pipeline of three plain commands (HMGET of 8 meta fields, the user's
// bucket HGET, the stock GET: one round trip, no Lua) and computes the
// answer in the api process by the same rules. It answers only where
// queue.lua would have written nothing — the counter advanced less than
// queue_step ago, and no admission to record — so its answer is the
// script's; otherwise it runs queue.lua (a second round trip). To keep
// that rare, each api process runs queue.lua instead of the pipeline for
// the first poll of a sale in each queue_step (advanceEvery): the counter
// is then kept fresh by the polls themselves, as before.
//
// Every write (join, admission, the counter, the business-aware cap) stays
// in queue.lua, so one place per user, the fair order and the cap are
// unchanged. sold_out and closed are read from the stock and the meta's
// status of the pipeline: at most advanceEvery old on the memory path
// (below), at once otherwise. The api's clock stands for
// Redis's TIME here, to judge the counter's age and whether the sale has
// ended (ends_ms): a skew between them makes the counter read up to the
// skew staler (api behind) or sends more polls to queue.lua (api ahead).
const advanceEvery = 10 * time.Millisecond // queue.lua's queue_step

var fastFields = []string{"status", "wr", "starts_ms", "ends_ms", "wr_rate", "wr_srv", "wr_at", "wr_ttl_ms", "paused", "wr_mr"}

// errSlow: the fast path cannot answer; queue.lua must.
var errSlow = errors.New("waitingroom: poll needs queue.lua")

// read answers user's place: the fast path when it can, else queue.lua.
func (s *Service) read(ctx context.Context, sale, user int64) (Place, error) {
	if s.noFastRead || sale <= 0 || user <= 0 {
		return s.run(ctx, "read", sale, user, proofNone)
	}
	now := time.Now()
	v, ok := s.advanced.Load(sale)
	if !ok {
		v, _ = s.advanced.LoadOrStore(sale, new(atomic.Int64))
	}
	last := v.(*atomic.Int64)
	if l := last.Load(); now.UnixMilli()-l >= advanceEvery.Milliseconds() && last.CompareAndSwap(l, now.UnixMilli()) {
		return s.run(ctx, "read", sale, user, proofNone)
	}
	p, err := s.fastRead(ctx, sale, user, now)
	if errors.Is(err, errSlow) {
		last.Store(now.UnixMilli())
		return s.run(ctx, "read", sale, user, proofNone)
	}
	return p, err
}

// saleMemo is what a fast path's pipeline read of a sale's meta and stock,
// kept by the process for the polls that follow within advanceEvery of it
// (the memory path, below).
type saleMemo struct {
	readAt                           time.Time
	status                           string
	wr                               bool
	starts, ends, rate, srv, at, ttl float64
	measured                         float64 // wr_mr: the measured rate (lib_queue's queue_measure); -1 absent
	atOK, paused                     bool
	left                             int64
}

// saleCache is the memory path's per sale: the last pipeline read of its
// figures, and the tickets of its shoppers seen waiting.
type saleCache struct {
	memo    atomic.Pointer[saleMemo]
	mu      sync.RWMutex
	tickets map[int64]int64 // user -> ticket
}

func (c *saleCache) ticket(user int64) (int64, bool) {
	c.mu.RLock()
	t, ok := c.tickets[user]
	c.mu.RUnlock()
	return t, ok
}

// maxTickets bounds the cache of waiting shoppers' tickets: past it the
// cache starts again empty (a shopper missing from it costs one pipeline).
const maxTickets = 1 << 20

// The memory path (issue 42: a poll within 80% of the sold-out path's
// answers a second): a poll within advanceEvery of this process's last
// pipeline read of the sale, by a shopper whose ticket it has seen waiting,
// is answered from those two alone, with no Redis: the same rules on the
// same figures, at most advanceEvery older than the fast path's. Every
// other poll reads Redis as before; an admission, a poll before the start
// and the first poll of each advanceEvery still go to Redis.
func (s *Service) fastRead(ctx context.Context, sale, user int64, now time.Time) (Place, error) {
	v, ok := s.memos.Load(sale)
	if !ok {
		v, _ = s.memos.LoadOrStore(sale, &saleCache{tickets: map[int64]int64{}})
	}
	cache := v.(*saleCache)
	if m := cache.memo.Load(); m != nil && now.Sub(m.readAt) < advanceEvery {
		if t, ok := cache.ticket(user); ok {
			p, err := s.answer(m, "", t, sale, user, now)
			if err == nil && p.Status == Waiting {
				return p, nil
			}
			// Anything but a wait is answered from Redis, as before.
		}
	}
	k := rediskeys.For(sale)
	pipe := s.rdb.Pipeline()
	mc := pipe.HMGet(ctx, k.Meta, fastFields...)
	pc := pipe.HGet(ctx, k.QueueUser(user), strconv.FormatInt(user, 10))
	sc := pipe.Get(ctx, k.Stock)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Place{}, fmt.Errorf("%w: queue: %w", ErrUnavailable, err)
	}
	m, ok := readMemo(mc.Val(), sc, now)
	if !ok {
		return Place{}, errSlow
	}
	cache.memo.Store(m)
	place, err := pc.Result()
	if errors.Is(err, redis.Nil) {
		place, err = "", nil
	} else if err != nil {
		return Place{}, errSlow
	}
	p, err := s.answer(m, place, 0, sale, user, now)
	if err == nil && p.Status == Waiting && p.Ticket > 0 && now.UnixMilli() >= int64(m.starts) {
		if s.ticketCount.Add(1) > maxTickets {
			s.memos.Range(func(_, v any) bool {
				c := v.(*saleCache)
				c.mu.Lock()
				c.tickets = map[int64]int64{}
				c.mu.Unlock()
				return true
			})
			s.ticketCount.Store(0)
		}
		cache.mu.Lock()
		cache.tickets[user] = p.Ticket
		cache.mu.Unlock()
	}
	return p, err
}

// readMemo reads the pipeline's meta fields (fastFields) and stock; ok
// false when they are not what a sale with a room holds (queue.lua judges).
func readMemo(m []any, sc *redis.StringCmd, now time.Time) (*saleMemo, bool) {
	if len(m) != len(fastFields) {
		return nil, false
	}
	str := func(i int) (string, bool) { x, ok := m[i].(string); return x, ok }
	num := func(i int) (float64, bool) {
		x, ok := str(i)
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	memo := &saleMemo{readAt: now}
	memo.status, _ = str(0)
	wr, _ := str(1)
	memo.wr = wr == "1"
	var ok1, ok2, ok3 bool
	memo.starts, ok1 = num(2)
	memo.ends, ok2 = num(3)
	memo.rate, _ = num(4)
	memo.srv, _ = num(5)
	memo.at, memo.atOK = num(6)
	memo.ttl, ok3 = num(7)
	paused, _ := str(8)
	memo.paused = paused == "1"
	var measured bool
	if memo.measured, measured = num(9); !measured {
		memo.measured = -1
	}
	left, err := sc.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false
	}
	memo.left = left
	if (memo.status == string(activity.Published) || memo.status == string(activity.Closed)) && memo.wr && !(ok1 && ok2 && ok3) {
		return nil, false
	}
	return memo, true
}

// answer is the fast path's rules on a sale's figures m and the shopper's
// place ("" when the shopper has none), or, when cached is above 0, the
// ticket the process holds of a shopper seen waiting: queue.lua's answer
// where it would write nothing, else errSlow.
func (s *Service) answer(m *saleMemo, place string, cached int64, sale, user int64, now time.Time) (Place, error) {
	if m.status != string(activity.Published) && m.status != string(activity.Closed) {
		return Place{}, codeErr(1, sale)
	}
	if !m.wr {
		return Place{}, codeErr(30, sale)
	}
	nowMS := float64(now.UnixMilli())
	if m.status == string(activity.Closed) || nowMS >= m.ends {
		return Place{Status: Closed, EstimatedWait: -1}, nil
	}
	if place == "" && cached <= 0 {
		return Place{}, ErrNotInQueue
	}
	if nowMS < m.starts {
		return Place{Status: Waiting, Position: -1, EstimatedWait: -1, PollAfter: MaxPoll / 3}, nil
	}
	ticket, admitted, ok := cached, int64(0), true
	if cached <= 0 {
		ticket, admitted, ok = parsePlace(place)
	}
	if !ok {
		return Place{}, errSlow
	}
	at := m.at
	if !m.atOK {
		at = m.starts
	}
	if nowMS-at >= float64(advanceEvery.Milliseconds()) {
		return Place{}, errSlow // queue.lua would advance the counter: it does
	}
	serving := int64(m.srv / 1000)
	if m.left <= 0 {
		return Place{Status: SoldOut, Ticket: ticket, Position: max(ticket-serving, 0), EstimatedWait: -1, PollAfter: MaxPoll / 3}, nil
	}
	if admitted > 0 {
		until := time.UnixMilli(admitted + int64(m.ttl)).UTC()
		if !until.After(now) {
			return Place{}, ErrAdmissionExpired
		}
		tok, err := s.signer.Issue(user, sale, until)
		if err != nil {
			return Place{}, err
		}
		return Place{Status: Admitted, Ticket: ticket, AdmittedUntil: until, Admission: tok, PollAfter: MaxPoll}, nil
	}
	if ticket <= serving {
		return Place{}, errSlow // admitted, not recorded yet: queue.lua records when
	}
	rate := EstimateRate(m.rate, m.measured)
	if m.paused {
		rate = 0 // the counter stands while the sale is paused (queue.lua): no estimate
	}
	return WaitingPlace(ticket, ticket-serving, rate), nil
}

// parsePlace reads a bucket's value (queue.lua): "-<s>" (slot s, ticket s
// once started), "<t>", or "<t>:<admitted ms>".
func parsePlace(v string) (ticket, admitted int64, ok bool) {
	t, a, hasA := stringsCut(v, ':')
	if len(t) > 0 && t[0] == '-' {
		t = t[1:]
	}
	var err error
	if ticket, err = strconv.ParseInt(t, 10, 64); err != nil {
		return 0, 0, false
	}
	if hasA {
		f, err := strconv.ParseFloat(a, 64) // Lua may have written it as a float
		if err != nil {
			return 0, 0, false
		}
		admitted = int64(f)
	}
	return ticket, admitted, true
}

func stringsCut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
