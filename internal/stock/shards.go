package stock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// A sale of many shards (activity.Shards; docs/orders.md "One hot sale,
// many shards"): each shard is its own hash slot with its own meta (the
// rules, and 'total', its allotment: the units it sold and holds), its
// stock, and its users' orders. A shard that runs dry pulls units from the
// others (Pull); a transfer is two steps in two slots, made crash-safe by a
// record in the donor's slot that the reconciler finishes (Settle).

var (
	takeScript      = lua.Script("transfer_take")
	giveScript      = lua.Script("transfer_give")
	shardReadScript = lua.Script("shard_read")
)

// Shares splits total units over shards: equal shares, the first
// total % shards shards one more.
func Shares(total int64, shards int) []int64 {
	if shards < 1 {
		shards = 1
	}
	out := make([]int64, shards)
	for s := range out {
		out[s] = total / int64(shards)
		if int64(s) < total%int64(shards) {
			out[s]++
		}
	}
	return out
}

// shardCounts remembers each loaded sale's shards: fixed once a sale is
// published, so read from Redis once per process.
type shardCounts struct {
	mu sync.RWMutex
	n  map[int64]int
}

func (c *shardCounts) get(id int64) (int, bool) {
	c.mu.RLock()
	n, ok := c.n[id]
	c.mu.RUnlock()
	return n, ok
}

func (c *shardCounts) set(id int64, n int) {
	c.mu.Lock()
	if c.n == nil {
		c.n = make(map[int64]int)
	}
	c.n[id] = n
	c.mu.Unlock()
}

// Shards returns how many shards activity id's sale has in Redis: its
// shard 0's meta says (a sale loaded before shards existed says nothing:
// 1). A sale Redis does not hold is 1 and not remembered.
func (s *Keeper) Shards(ctx context.Context, id int64) (int, error) {
	if n, ok := s.shards.get(id); ok {
		return n, nil
	}
	m, err := s.rdb.HMGet(ctx, rediskeys.For(id).Meta, "status", "shards").Result()
	if err != nil {
		return 0, fmt.Errorf("%w: shards: %w", ErrUnavailable, err)
	}
	if m[0] == nil {
		return 1, nil
	}
	n := 1
	if v, ok := m[1].(string); ok {
		if x, err := strconv.Atoi(v); err == nil && x > 1 {
			n = x
		}
	}
	s.shards.set(id, n)
	return n, nil
}

// Holding is what a sale's shards hold, read by Left.
type Holding struct {
	Left []int64 // units left, by shard
	// InTransit is the units on their way between shards (taken from a
	// donor, not yet given): the sale's total less the shards'
	// allotments. Shards read at different moments can make it negative
	// (a donor read before a take, its receiver after the give: the units
	// are in both Lefts), and Sum is exact all the same.
	InTransit int64
	// began is when the collect that read it began: a snapshot's bound
	// holds at a moment after it.
	began time.Time
}

// Sum is the units the sale holds: left and on their way — its total less
// what each shard sold (allotment less stock), which no transfer changes.
func (h Holding) Sum() int64 {
	n := h.InTransit
	for _, l := range h.Left {
		n += l
	}
	return n
}

// collect reads every shard of sale id once (shard_read.lua each, one
// pipeline), with each shard's count of returns.
func (s *Keeper) collect(ctx context.Context, id int64, shards int) (Holding, []int64, error) {
	began := time.Now()
	cmds := make([]*redis.Cmd, shards)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range cmds {
			k := rediskeys.ForShard(id, sh, shards)
			cmds[sh] = shardReadScript.EvalSha(ctx, p, []string{k.Meta, k.Stock})
		}
		return nil
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range cmds {
				k := rediskeys.ForShard(id, sh, shards)
				cmds[sh] = shardReadScript.Eval(ctx, p, []string{k.Meta, k.Stock})
			}
			return nil
		})
	}
	if err != nil {
		return Holding{}, nil, fmt.Errorf("%w: read shards: %w", ErrUnavailable, err)
	}
	h := Holding{Left: make([]int64, shards), began: began}
	returns := make([]int64, shards)
	var saleTotal int64
	for sh, c := range cmds {
		v, err := c.Int64Slice()
		if err != nil || len(v) != 4 {
			return Holding{}, nil, fmt.Errorf("%w: shard_read.lua returned %v, %v", ErrUnavailable, v, err)
		}
		h.Left[sh], returns[sh] = v[0], v[3]
		h.InTransit -= v[1]
		if sh == 0 {
			saleTotal = v[2] // every shard's meta holds it; shard 0's is the one Read takes
		}
	}
	if saleTotal < 0 {
		if shards > 1 {
			// Summing allotments with no total to hold them against
			// would count the others' units as sold.
			return Holding{}, nil, fmt.Errorf("%w: sale %d in %d shards has no sale_total in its meta (load it again: publish)", ErrUnavailable, id, shards)
		}
		saleTotal = -h.InTransit // one shard: its allotment is the sale's
	}
	h.InTransit += saleTotal
	return h, returns, nil
}

// Left returns what sale id's shards hold; when it says none, that is true
// of one moment during the call (snapshot).
func (s *Keeper) Left(ctx context.Context, id int64) (Holding, error) {
	n, err := s.Shards(ctx, id)
	if err != nil {
		return Holding{}, err
	}
	h, v, err := s.collect(ctx, id, n)
	if err != nil {
		return h, err
	}
	return s.snapshot(ctx, id, n, h, v, 1)
}

// snapshot tells whether sale id (n shards) held fewer than below units at
// one moment, from h, a collect, and v, its counts of returns. The shards
// are read one by one (different slots, maybe different nodes). The sum
// is exact however transfers run between the reads (shard_read.lua says
// why), but a return into a shard already read is missed; and what a
// shard holds only shrinks while nothing returns to it. So after two
// collects in a row with no return between them, the sale held at most
// what the first found at the moment between the two (a double collect).
// It returns the first of such a pair, once that found fewer than below,
// or else the first collect that finds at least below (the sale moved on:
// a caller tries again with what it finds).
func (s *Keeper) snapshot(ctx context.Context, id int64, n int, h Holding, v []int64, below int64) (Holding, error) {
	for try := 0; try < 100; try++ {
		if h.Sum() >= below {
			return h, nil
		}
		h2, v2, err := s.collect(ctx, id, n)
		if err != nil {
			return Holding{}, err
		}
		if equal(v, v2) {
			return h, nil
		}
		h, v = h2, v2
	}
	return Holding{}, ErrPullBusy
}

func equal(a, b []int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// ErrPullBusy: Pull went round many times without either moving units or
// finding the sale empty (others kept taking what it found).
var ErrPullBusy = errors.New("stock: shards busy")

// Pull moves units of sale id into shard to, which had fewer than want
// left: from the shard holding most, half of what it holds and at least
// want (or all it has). It returns more true when the order should be
// placed again (units were moved in, or shard to holds want by now), and
// false with left, fewer than want, when it cannot be served: the sale
// held at most left units at one moment of the pull (a snapshot; 0: every
// shard empty — the sale is sold out). Concurrent
// pulls into one shard in this process share one (singleflight: the crowd
// of a dry shard pulls once), each caller judging its own want by what the
// pull proved (pulled). The pull's Redis steps run to their end even if
// the caller that started it goes (a transfer half done would strand its
// units until the next pull or the reconciler finishes it).
func (s *Keeper) Pull(ctx context.Context, id int64, to int, want int64) (more bool, left int64, err error) {
	key := strconv.FormatInt(id, 10) + ":" + strconv.Itoa(to)
	joined := time.Now()
	for round := 0; ; round++ {
		ch := s.pulls.DoChan(key, func() (any, error) {
			if s.beforePull != nil {
				s.beforePull(want)
			}
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pullTimeout)
			defer cancel()
			return s.pull(wctx, id, to, want)
		})
		var res singleflight.Result
		select {
		case <-ctx.Done():
			return false, 0, fmt.Errorf("%w: pull: %w", ErrUnavailable, ctx.Err())
		case res = <-ch:
		}
		if res.Err != nil {
			return false, 0, res.Err
		}
		p := res.Val.(pulled)
		if !p.moved && p.proven && p.left < want {
			if !p.since.Before(joined) {
				return false, p.left, nil
			}
			if round == 0 {
				// Proved of a moment before this caller came (the pull it
				// joined had read the shards already): units returned
				// since are not in the proof, and a refusal must be true
				// of a moment of the caller's own request. The next pull
				// into the shard begins after this one ended, so after
				// the caller came: its proof, if it proves, is the
				// caller's (and the late joiners share it, as the crowd
				// shares the first).
				continue
			}
		}
		// Units were moved in or are left, or the pull (another caller's,
		// for fewer units) proved nothing of this caller's want: place
		// again, and pull again if the shard is still short.
		return true, 0, nil
	}
}

// pullTimeout bounds one pull's Redis steps.
const pullTimeout = 3 * time.Second

// pulled is what a pull found: units moved into the shard, or, proven
// by a snapshot, that the sale held at most left units at one moment of
// the pull (0: sold out). A pull is shared by the callers pulling into one
// shard at once (singleflight), each wanting its own quantity: the proof
// refuses only those wanting more than left.
type pulled struct {
	moved  bool
	proven bool
	left   int64
	since  time.Time // the proof's moment is after this
}

func (s *Keeper) pull(ctx context.Context, id int64, to int, want int64) (pulled, error) {
	n, err := s.Shards(ctx, id)
	if err != nil {
		return pulled{}, err
	}
	for try := 0; try < 50; try++ {
		h, v, err := s.collect(ctx, id, n)
		if err != nil {
			return pulled{}, err
		}
		if h.Sum() < want {
			// The sale seems to hold fewer than want, wherever its units
			// are (none: sold out): no move serves the order. (Moving them
			// anyway, the pulls of several shards for such orders bounced
			// the last units between them until each order gave up, a
			// 503.) Sure only of a snapshot: a single collect can miss a
			// return into a shard read before it.
			if h, err = s.snapshot(ctx, id, n, h, v, want); err != nil {
				return pulled{}, err
			}
			if h.Sum() < want {
				if s.afterProof != nil {
					s.afterProof()
				}
				return pulled{proven: true, left: h.Sum(), since: h.began}, nil
			}
		}
		if h.Left[to] >= want {
			return pulled{}, nil // another pull (or a return) filled it meanwhile
		}
		from, most := -1, int64(0)
		for sh, l := range h.Left {
			if sh != to && l > most {
				from, most = sh, l
			}
		}
		if from < 0 {
			// Only units on their way (taken, not yet given: to this
			// shard or another): finish their transfers here (each step is
			// once per transfer, so a live mover finishing its own too is
			// harmless; one whose mover died would otherwise wait for the
			// reconciler's pass), then pull from where they landed.
			if done, err := s.settle(ctx, id, n, 0); err != nil || done > 0 {
				continue
			}
			select {
			case <-ctx.Done():
				return pulled{}, fmt.Errorf("%w: pull: %w", ErrUnavailable, ctx.Err())
			case <-time.After(2 * time.Millisecond):
			}
			continue
		}
		moved, err := s.Transfer(ctx, id, from, to, max(want, (most+1)/2))
		if err != nil {
			return pulled{}, err
		}
		if moved > 0 {
			return pulled{moved: true}, nil
		}
	}
	return pulled{}, ErrPullBusy
}

// Transfer moves up to units units of sale id from shard from to shard to,
// and returns how many it moved (0: from had none). Its steps: take from
// from with a new transfer id and a record of it (transfer_take.lua), give
// to to once (transfer_give.lua), delete the record. A failure after the
// take leaves the record for Settle, which finishes the transfer.
func (s *Keeper) Transfer(ctx context.Context, id int64, from, to int, units int64) (int64, error) {
	var b [10]byte
	_, _ = rand.Read(b[:])
	tid := hex.EncodeToString(b[:])
	n, err := s.Shards(ctx, id)
	if err != nil {
		return 0, err
	}
	src := rediskeys.ForShard(id, from, n)
	// Each step acknowledged by the replicas (Config.Ack) before the next:
	// a failover that dropped a take the receiver was given would make
	// units from nowhere. Unacknowledged, the step may stand or not; the
	// record, where it stands, is Settle's to finish.
	units, err = s.runAcked(ctx, takeScript, []string{src.Meta, src.Stock, src.Transit, src.Taken}, tid, to, units).Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: transfer take: %w", ErrUnavailable, err)
	}
	if units == 0 {
		return 0, nil
	}
	if s.afterTake != nil {
		s.afterTake()
	}
	if err := s.finish(ctx, id, from, to, n, tid, units); err != nil {
		return 0, err
	}
	return units, nil
}

// finish gives transfer tid's n units to shard to of sale id and deletes
// its record in shard from.
func (s *Keeper) finish(ctx context.Context, id int64, from, to, shards int, tid string, units int64) error {
	dst := rediskeys.ForShard(id, to, shards)
	if err := s.runAcked(ctx, giveScript, []string{dst.Meta, dst.Stock, dst.Applied}, tid, units).Err(); err != nil {
		return fmt.Errorf("%w: transfer give: %w", ErrUnavailable, err)
	}
	if err := s.rdb.HDel(ctx, rediskeys.ForShard(id, from, shards).Transit, tid).Err(); err != nil {
		return fmt.Errorf("%w: transfer done: %w", ErrUnavailable, err)
	}
	return nil
}

// Settle finishes sale id's transfers taken more than olderThan ago and
// not finished (their mover died, or lost Redis, between the steps), and
// returns how many it finished. The reconciler runs it.
func (s *Keeper) Settle(ctx context.Context, id int64, olderThan time.Duration) (int, error) {
	n, err := s.Shards(ctx, id)
	if err != nil || n <= 1 {
		return 0, err
	}
	return s.settle(ctx, id, n, olderThan)
}

// settle is Settle of sale id of n shards.
func (s *Keeper) settle(ctx context.Context, id int64, n int, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan).UnixMilli()
	done := 0
	for from := 0; from < n; from++ {
		recs, err := s.rdb.HGetAll(ctx, rediskeys.ForShard(id, from, n).Transit).Result()
		if err != nil {
			return done, fmt.Errorf("%w: transit: %w", ErrUnavailable, err)
		}
		for tid, rec := range recs {
			to, units, at, ok := parseTransit(rec)
			if !ok || at > cutoff || to < 0 || to >= n {
				continue
			}
			if err := s.finish(ctx, id, from, to, n, tid, units); err != nil {
				return done, err
			}
			done++
		}
	}
	return done, nil
}

// parseTransit reads a transit record, "<to>:<units>:<taken ms>".
func parseTransit(rec string) (to int, units, at int64, ok bool) {
	f := strings.Split(rec, ":")
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	to, e1 := strconv.Atoi(f[0])
	units, e2 := strconv.ParseInt(f[1], 10, 64)
	at, e3 := strconv.ParseInt(f[2], 10, 64)
	return to, units, at, e1 == nil && e2 == nil && e3 == nil && units > 0
}

// SoldOutNow tells whether sale id, in more than one shard, is sold out
// now, and at which version: published, its version the same before and
// after a snapshot (Left) that found no unit in any shard. A sale of one
// shard says nothing here (ok false): its accept that takes the last unit
// marks the sell-out itself (lib_accept.lua). A sharded sale's last unit is
// taken in one shard while the others are read by no script, so its
// sell-out is proven from outside, by the reconciler's pass
// (docs/webhooks.md, activity.sold_out).
func (s *Keeper) SoldOutNow(ctx context.Context, id int64) (version int64, ok bool, err error) {
	n, err := s.Shards(ctx, id)
	if err != nil || n <= 1 {
		return 0, false, err
	}
	meta := rediskeys.For(id).Meta
	read := func() (string, int64, error) {
		m, err := s.rdb.HMGet(ctx, meta, "status", "version").Result()
		if err != nil {
			return "", 0, fmt.Errorf("%w: sold out: %w", ErrUnavailable, err)
		}
		status, _ := m[0].(string)
		vs, _ := m[1].(string)
		v, _ := strconv.ParseInt(vs, 10, 64)
		return status, v, nil
	}
	status, before, err := read()
	if err != nil || status != string(activity.Published) || before == 0 {
		return 0, false, err
	}
	h, err := s.Left(ctx, id)
	if err != nil || h.Sum() > 0 {
		return 0, false, err
	}
	// A restock between the reads is a new version with units: the
	// snapshot then proves nothing of either.
	status, after, err := read()
	if err != nil || status != string(activity.Published) || after != before {
		return 0, false, err
	}
	return before, true, nil
}
