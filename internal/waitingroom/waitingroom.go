// Package waitingroom is a sale's waiting room (issue 42,
// docs/waiting-room.md): shoppers join a queue, get a place, and are let
// in at the sale's admit_per_second with a signed admission token the
// order routes check in the api process. The queue lives in Redis in the
// sale's slot (queue.lua, lib_queue.lua): a place per user in a bucketed
// hash, counters in the sale's meta; a place is O(1) to read.
package waitingroom

import (
	"context"
	"crypto/rand"
	"encoding/binary"
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

// Status is where a shopper is in a sale's waiting room.
type Status string

// The statuses of a place.
const (
	Waiting  Status = "waiting"
	Admitted Status = "admitted"
	SoldOut  Status = "sold_out"
	Closed   Status = "closed"
)

// Place is a shopper's place in a sale's waiting room.
type Place struct {
	Status Status
	// Ticket is the shopper's place in line from 1 (0: none, or not final
	// before the start).
	Ticket int64
	// Position is how many are admitted before the shopper (ticket less
	// the serving counter) while waiting; -1 before the start, when the
	// early joiners' shuffle is not final.
	Position int64
	// EstimatedWait is Position at the sale's admit_per_second; -1 when
	// Position is.
	EstimatedWait time.Duration
	// PollAfter is when the shopper's app should ask again.
	PollAfter time.Duration
	// Admission and AdmittedUntil: the admission token and its end, when
	// admitted.
	Admission     string
	AdmittedUntil time.Time
	// FirstAdmitted: this read is the first to see the shopper admitted
	// (metrics count admissions by it).
	FirstAdmitted bool
}

// Poll intervals: the server tells the app when to ask again.
const (
	MinPoll = time.Second
	MaxPoll = 15 * time.Second
)

// Service is the waiting rooms of every sale in one Redis.
type Service struct {
	rdb    redis.UniversalClient
	signer *Signer
	// flags caches, per sale, whether it has a waiting room (Gate): fixed
	// once the sale is published (activity.Apply), so never refreshed.
	flags sync.Map // int64 -> bool
	// Metrics, if set, counts joins and admissions.
	Metrics *Metrics
	// advanced: per sale, the ms this process last ran queue.lua for a
	// poll (fastread.go); noFastRead turns the fast path off (the bench's
	// side-by-side "before").
	advanced   sync.Map // int64 -> *atomic.Int64
	noFastRead bool
	// memos and tickets are the memory path's (fastread.go): per sale the
	// last pipeline read of its figures, and the tickets of shoppers seen
	// waiting (ticketCount of them, bounded by maxTickets).
	memos       sync.Map // int64 -> *saleCache
	ticketCount atomic.Int64
}

// New returns the waiting rooms on rdb, their tokens signed by signer.
func New(rdb redis.UniversalClient, signer *Signer) *Service {
	return &Service{rdb: rdb, signer: signer}
}

// Signer is the service's signer.
func (s *Service) Signer() *Signer { return s.signer }

// Proof is a join's proof of work (empty: none).
type Proof struct{ Challenge, Nonce string }

// Join puts user in sale's queue, or answers the place it has: joining
// again never gives a better one. Errors: activity.ErrNotOnSale,
// ErrNoWaitingRoom, ErrPowRequired, ErrPowInvalid, ErrAdmissionExpired, or
// a Redis failure.
func (s *Service) Join(ctx context.Context, sale, user int64, p Proof) (Place, error) {
	return s.run(ctx, "join", sale, user, s.signer.ProofBits(p.Challenge, p.Nonce, user, sale))
}

// Read answers user's place in sale's queue. Errors: Join's, and
// ErrNotInQueue.
// Most reads are answered without a script (fastread.go).
func (s *Service) Read(ctx context.Context, sale, user int64) (Place, error) {
	return s.read(ctx, sale, user)
}

func (s *Service) run(ctx context.Context, mode string, sale, user int64, proof int) (Place, error) {
	if sale <= 0 || user <= 0 {
		return Place{}, fmt.Errorf("%w: sale %d", activity.ErrNotOnSale, sale)
	}
	k := rediskeys.For(sale)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	draw := binary.LittleEndian.Uint64(rnd[:]) >> 12 // [0, 2^52): exact in Lua's doubles
	res, err := queueScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.QueueHist(), k.QueueUser(user)},
		mode, strconv.FormatInt(user, 10), draw, proof, k.QueueSlotPrefix(), k.QueueUserPrefix(), rediskeys.QueueBuckets).Int64Slice()
	if err != nil {
		return Place{}, fmt.Errorf("%w: queue: %w", ErrUnavailable, err)
	}
	if len(res) != 7 {
		return Place{}, fmt.Errorf("waitingroom: queue.lua returned %v", res)
	}
	code, st, ticket, pos, untilMS, rate, first := res[0], res[1], res[2], res[3], res[4], res[5], res[6] == 1
	if err := codeErr(code, sale); err != nil {
		if errors.Is(err, ErrAdmissionExpired) && first && s.Metrics != nil {
			s.Metrics.admitted.Inc()
		}
		return Place{}, err
	}
	if mode == "join" && s.Metrics != nil {
		s.Metrics.joins.Inc()
	}
	p := Place{Ticket: ticket, Position: pos, EstimatedWait: -1, FirstAdmitted: first}
	switch st {
	case 1:
		p = WaitingPlace(ticket, pos, rate)
	case 2:
		p.Status, p.Position = Admitted, 0
		p.EstimatedWait = 0
		p.AdmittedUntil = time.UnixMilli(untilMS).UTC()
		var err error
		if p.Admission, err = s.signer.Issue(user, sale, p.AdmittedUntil); err != nil {
			return Place{}, err
		}
		p.PollAfter = MaxPoll
		if first && s.Metrics != nil {
			s.Metrics.admitted.Inc()
		}
	case 3:
		p.Status, p.PollAfter = SoldOut, MaxPoll/3 // units may come back
	case 4:
		p.Status, p.PollAfter, p.Position, p.Ticket = Closed, 0, 0, 0
	default:
		return Place{}, fmt.Errorf("waitingroom: queue.lua returned status %d", st)
	}
	return p, nil
}

// WaitingPlace is the place of a shopper waiting with ticket at position
// (-1: before the start) in a sale admitting rateMilli thousandths of a
// shopper a second (the estimate's rate: EstimateRate; 0: no estimate):
// what Read answers, and what a queue stream computes from the sale's
// Counters.
func WaitingPlace(ticket, position, rateMilli int64) Place {
	p := Place{Status: Waiting, Ticket: ticket, Position: position, EstimatedWait: -1}
	if position >= 0 && rateMilli > 0 {
		p.EstimatedWait = time.Duration((position*1000*int64(time.Second) + rateMilli - 1) / rateMilli)
		p.PollAfter = clampPoll(p.EstimatedWait / 10)
	} else {
		p.PollAfter = MaxPoll / 3
	}
	return p
}

// EstimateRate is the rate a waiting shopper's estimate uses, in thousandths
// of a shopper a second, from the rate set and the measured one (wr_mr; 0:
// none yet: below 0): the measured, never above the set — lib_queue.lua's
// queue_est_rate, for the memory path.
func EstimateRate(set, measured float64) int64 {
	if measured < 0 || measured > set {
		measured = set
	}
	return int64(measured * 1000)
}

// Counters are a sale's waiting room's figures that are the same for every
// shopper of it (counters.lua).
type Counters struct {
	// Status: Waiting while the queue moves (Serving is the counter),
	// SoldOut, Closed; "" before the start (no position is final).
	Status  Status
	Serving int64
	// RateMilli is the estimate's rate, in thousandths of a shopper a
	// second (EstimateRate: the measured, at most the set); 0 while paused.
	RateMilli int64
}

// Counters advances sale's serving counter to now, as a read does, and
// returns it with the sale's state: one script, whatever the number of
// shoppers (the queue streams run it once a tick per sale). Errors:
// activity.ErrNotOnSale, ErrNoWaitingRoom (not told apart: code 1), or a
// Redis failure.
func (s *Service) Counters(ctx context.Context, sale int64) (Counters, error) {
	k := rediskeys.For(sale)
	res, err := countersScript.Run(ctx, s.rdb, []string{k.Meta, k.Stock, k.QueueHist()}).Int64Slice()
	if err != nil {
		return Counters{}, fmt.Errorf("%w: counters: %w", ErrUnavailable, err)
	}
	if len(res) != 3 {
		return Counters{}, fmt.Errorf("waitingroom: counters.lua returned %v", res)
	}
	c := Counters{Serving: res[1], RateMilli: res[2]}
	switch res[0] {
	case 0:
		return Counters{}, codeErr(1, sale)
	case 1:
		c.Status = Waiting
	case 3:
		c.Status = SoldOut
	case 4:
		c.Status = Closed
	case 5:
	default:
		return Counters{}, fmt.Errorf("waitingroom: counters.lua returned status %d", res[0])
	}
	return c, nil
}

func clampPoll(d time.Duration) time.Duration {
	return min(max(d.Round(time.Second), MinPoll), MaxPoll)
}

// codeErr is queue.lua's code as an error (nil for 0): the one table.
func codeErr(code, sale int64) error {
	switch code {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: activity %d is not published", activity.ErrNotOnSale, sale)
	case 30:
		return fmt.Errorf("%w: activity %d", ErrNoWaitingRoom, sale)
	case 31:
		return ErrNotInQueue
	case 32:
		return ErrAdmissionExpired
	case 33:
		return ErrPowRequired
	case 34:
		return ErrPowInvalid
	}
	return fmt.Errorf("waitingroom: queue.lua returned code %d", code)
}

// ErrUnavailable wraps a failure to reach Redis.
var ErrUnavailable = errors.New("waitingroom: redis unavailable")

// NewChallenge returns a proof-of-work challenge for user joining sale,
// with the sale's join_pow_bits (0: the sale asks for none, and a join
// needs no proof). Errors: activity.ErrNotOnSale, ErrNoWaitingRoom.
func (s *Service) NewChallenge(ctx context.Context, sale, user int64) (Challenge, error) {
	v, err := s.rdb.HMGet(ctx, rediskeys.For(sale).Meta, "status", "wr", "wr_pow").Result()
	if err != nil {
		return Challenge{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if st, _ := v[0].(string); st != string(activity.Published) && st != string(activity.Closed) {
		return Challenge{}, codeErr(1, sale)
	}
	if wr, _ := v[1].(string); wr != "1" {
		return Challenge{}, codeErr(30, sale)
	}
	bits, _ := strconv.Atoi(fmt.Sprint(v[2]))
	return s.signer.NewChallenge(user, sale, bits), nil
}

// Admit checks that user may place an order or open or join a group in
// sale: always in a sale without a waiting room; in one with it, only with
// token, an admission of that user to that sale not expired (Signer.Verify:
// in this process). Whether the sale has a waiting room is read from Redis
// once per sale and process, then remembered (it cannot change once
// published); a sale Redis does not know passes (its order is refused as
// not on sale). Errors: ErrNotAdmitted, or a Redis failure.
func (s *Service) Admit(ctx context.Context, sale, user int64, token string) error {
	has, ok := s.flags.Load(sale)
	if !ok {
		v, err := s.rdb.HMGet(ctx, rediskeys.For(sale).Meta, "status", "wr").Result()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		st, _ := v[0].(string)
		if st != string(activity.Published) && st != string(activity.Closed) {
			return nil
		}
		wr, _ := v[1].(string)
		has = wr == "1"
		s.flags.Store(sale, has)
	}
	if !has.(bool) {
		return nil
	}
	return s.signer.Verify(token, user, sale)
}
