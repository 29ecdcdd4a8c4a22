// Package stock is what is the stock's own, apart from the orders that take
// it (internal/redisstore decides those): Load publishes an activity's
// rules and stock into Redis (load.lua) and Read returns its live figures;
// a local sold-out flag refuses the crowd after a sale sells out without
// asking Redis, and WatchRestock clears it when units come back. MySQL
// holds the record of activities and orders; activity.Reconcile compares it
// with what Read returns.
package stock

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/redispipe"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

var (
	lua        = luascript.New(scriptFiles, "scripts", waitingroom.Lua)
	loadScript = lua.Script("load")
)

// Scripts are the scripts the stock loads, by name, as Redis runs them
// (cmd/api scripts prints them).
func Scripts() map[string]string {
	src, err := lua.Source("load")
	if err != nil {
		panic(err) // a build mistake, caught by every test
	}
	out := map[string]string{"load": src}
	for _, name := range []string{"transfer_take", "transfer_give", "shard_read", "stock_take"} {
		if out[name], err = lua.Source(name); err != nil {
			panic(err)
		}
	}
	return out
}

// Errors of this package; the sale's own refusals are activity's
// (ErrSoldOut, ErrLimitExceeded, ErrNotStarted, ErrEnded, ErrNotOnSale).
var (
	// ErrInvalid: an activity that cannot be loaded (a draft).
	ErrInvalid = errors.New("stock: invalid request")
	// ErrUnavailable wraps a failure to reach Redis.
	ErrUnavailable = errors.New("stock: redis unavailable")
)

// Config tunes a Keeper. The zero value gives the defaults in the comments.
type Config struct {
	// SoldOutTTL is how long the local sold-out flag refuses without asking
	// Redis when no restock notice clears it. Default 1s.
	SoldOutTTL time.Duration
	// Ack is how many replicas must confirm a load (a publish, a close)
	// before it is reported; none by default.
	Ack redispipe.Ack
	// Retention is how long a sale's keys and records outlive the last
	// moment anything can still act on them (activity.LiveUntil,
	// activity.RecordTTL). Default activity.DefaultRetention, 7 days.
	Retention time.Duration
}

// Keeper keeps the stock of all activities in one Redis.
type Keeper struct {
	rdb     redis.UniversalClient
	cfg     Config
	soldOut *soldOut
	shards  shardCounts
	pulls   singleflight.Group
	// afterTake, when set (tests), runs between a transfer's take and its
	// give: where a mover killed -9 leaves a transfer for Settle.
	afterTake func()
	// beforePull, when set (tests), runs as a pull for want units begins,
	// while callers pulling into the same shard join it.
	beforePull func(want int64)
	// afterProof, when set (tests), runs when a pull has proved the sale
	// holds fewer than it wanted, before it answers.
	afterProof func()
}

// New returns a Keeper on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Keeper {
	if cfg.SoldOutTTL <= 0 {
		cfg.SoldOutTTL = time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = activity.DefaultRetention
	}
	return &Keeper{rdb: rdb, cfg: cfg, soldOut: newSoldOut(cfg.SoldOutTTL)}
}

// Load publishes a's rules and stock into Redis, or refreshes its rules (a
// later end, closing). The stock is set only the first time: loading again
// never undoes sales. A load of an older a.Version than Redis holds changes
// nothing (so does reopening a closed sale): racing admin changes leave
// Redis at MySQL's latest. It returns the units left.
func (s *Keeper) Load(ctx context.Context, a activity.Activity) (int64, error) {
	if a.Status != activity.Published && a.Status != activity.Closed {
		return 0, fmt.Errorf("%w: only a published or closed activity is loaded, not %s", ErrInvalid, a.Status)
	}
	n := a.ShardCount()
	shares := Shares(int64(a.TotalStock), n)
	var left int64
	// Shard 0 last: its meta is what says the sale is in Redis (and how
	// many shards it has), so a load that fails midway leaves a sale an
	// order cannot reach yet rather than one with shards missing.
	for sh := n - 1; sh >= 0; sh-- {
		l, err := s.loadShard(ctx, a, sh, n, shares[sh])
		if err != nil {
			return 0, err
		}
		left += l
	}
	s.shards.set(a.ID, n)
	if left > 0 {
		// A restock's notice (load.lua's PUBLISH) reaches this process's
		// WatchRestock a moment later, and an order in that moment was
		// refused as sold out by the flag this load made wrong (CI: the
		// contract's "a gold after the restock" got 409). The process that
		// loaded lets its flags go at once; the others on the notice.
		s.soldOut.clear(a.ID)
	}
	return left, nil
}

// runAcked is redispipe.RunAcked with Config.Ack, its two errors as the
// Cmd's one: the script's, else the replicas' (the answer must not be
// reported when they fell short).
func (s *Keeper) runAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd, ackErr := redispipe.RunAcked(ctx, s.rdb, s.cfg.Ack, script, keys, args...)
	if cmd == nil {
		cmd = redis.NewCmd(ctx)
	}
	if ackErr != nil && cmd.Err() == nil {
		cmd.SetErr(ackErr)
	}
	return cmd
}

// loadShard runs load.lua for shard sh (of n) of a, whose share of the
// stock is share. It returns the shard's units left.
func (s *Keeper) loadShard(ctx context.Context, a activity.Activity, sh, n int, share int64) (int64, error) {
	k := rediskeys.ForShard(a.ID, sh, n)
	paused := "0"
	if a.Paused {
		paused = "1"
	}
	items := a.ItemList()
	args := make([]any, 0, 18+4*len(items))
	args = append(args, string(a.Status), a.StartsAt.UnixMilli(), a.EndsAt.UnixMilli(), a.PerUserLimit, a.TotalStock,
		a.LiveUntil(s.cfg.Retention).UnixMilli(), a.PriceCents, a.PaymentTTL.Milliseconds(),
		string(a.Type), a.GroupSize, a.GroupTTL.Milliseconds(), a.RecordTTL(s.cfg.Retention).Milliseconds(),
		a.Version, n, share, sh, paused, len(items))
	for _, it := range items {
		args = append(args, it.SKU, it.PriceCents, it.PerUserLimit, it.Stock)
	}
	wr := "0"
	if a.WaitingRoom {
		wr = "1"
	}
	args = append(args, wr, a.AdmitPerSecond, a.AdmissionTTLOrDefault().Milliseconds(), a.JoinPowBits)
	res, err := s.runAcked(ctx, loadScript, []string{k.Meta, k.Stock, k.Users, k.Outbox, k.Forming(), k.Unsettled(), k.Orders, k.Idem,
		k.Payments, k.Transit, k.Taken, k.Applied, k.Items, k.ItemUsers, k.QueueHist()}, args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("%w: load: %w", ErrUnavailable, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("stock: load.lua returned %v", res)
	}
	return res[0], nil
}

// MaxUnrecordedRead bounds the orders waiting for MySQL that Read lists
// (activity.Live.UnrecordedOrders): the oldest this many, and the newest
// this many of those within activity.PersistenceGrace. How many wait, and
// how many of them longer than the grace, are counted whole, however many
// (activity.Live.Unrecorded, Overdue).
const MaxUnrecordedRead = 1000

// Read is ReadAt now.
func (s *Keeper) Read(ctx context.Context, id int64) (activity.Live, error) {
	return s.ReadAt(ctx, id, time.Now())
}

// ReadAt returns activity id's live figures, and the orders waiting for
// MySQL (its outbox: how many, how many of them longer than
// activity.PersistenceGrace before now, and those MaxUnrecordedRead
// says), in one snapshot of each shard: a sharded sale's figures are the
// sums over its shards, and Shards lists each shard's. Its Total is the
// sale's (every shard's meta holds it), and Remaining that total less what
// each shard sold (its allotment less its stock): a transfer moves both of
// a shard's together, so the figures are exact while units move, although
// each shard is read apart (at most readAtOnce at a time: one round trip's
// wait for a sale of up to that many shards, not one per shard).
func (s *Keeper) ReadAt(ctx context.Context, id int64, now time.Time) (activity.Live, error) {
	n, err := s.Shards(ctx, id)
	if err != nil {
		return activity.Live{}, err
	}
	cutoff := now.Add(-activity.PersistenceGrace)
	read := make([]activity.Live, n)
	var saleTotal int64 // shard 0's meta's (every shard's holds it)
	if n == 1 {
		read[0], _, err = s.readShard(ctx, id, 0, 1, cutoff)
	} else {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(readAtOnce)
		for sh := range n {
			g.Go(func() (err error) {
				var st int64
				read[sh], st, err = s.readShard(gctx, id, sh, n, cutoff)
				if sh == 0 {
					saleTotal = st
				}
				return err
			})
		}
		err = g.Wait()
	}
	if err != nil {
		return activity.Live{}, err
	}
	var v activity.Live
	var sold int64
	for sh, p := range read {
		if !p.Known {
			if sh == 0 {
				return activity.Live{}, nil
			}
			continue
		}
		if n > 1 {
			v.Shards = append(v.Shards, activity.ShardLive{Shard: sh, Total: p.Total, Remaining: p.Remaining,
				Accepted: p.Accepted, Returned: p.Returned, Unrecorded: p.Unrecorded})
			sold += p.Total - p.Remaining
		}
		if sh == 0 {
			shards := v.Shards
			v = p
			v.Shards = shards
			continue
		}
		v.Accepted += p.Accepted
		v.Returned += p.Returned
		v.Unrecorded += p.Unrecorded
		v.Overdue += p.Overdue
		v.UnrecordedOrders = append(v.UnrecordedOrders, p.UnrecordedOrders...)
	}
	if n > 1 {
		sortBySince(v.UnrecordedOrders)
		v.UnrecordedOrders = listedEnds(v.UnrecordedOrders, cutoff)
		if len(v.UnrecordedOrders) > 0 {
			v.OldestUnrecorded = v.UnrecordedOrders[0].Since
		}
		v.Total, v.Remaining = saleTotal, saleTotal-sold
	}
	return v, nil
}

// readAtOnce bounds the shards Read reads at once.
const readAtOnce = 16

// readShard reads shard sh of sale id (ReadAt), its outbox entries before
// cutoff counted as overdue, and the sale's total its meta holds.
func (s *Keeper) readShard(ctx context.Context, id int64, sh, n int, cutoff time.Time) (activity.Live, int64, error) {
	k := rediskeys.ForShard(id, sh, n)
	// An entry's score is whole milliseconds: it is before cutoff when it
	// is before cutoff's millisecond rounded up.
	before := strconv.FormatInt((cutoff.UnixNano()+int64(time.Millisecond)-1)/int64(time.Millisecond), 10)
	var meta, items *redis.MapStringStringCmd
	var left *redis.StringCmd
	var oldest, recent *redis.ZSliceCmd
	var waiting, overdue *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, k.Meta)
		left = p.Get(ctx, k.Stock)
		oldest = p.ZRangeWithScores(ctx, k.Outbox, 0, MaxUnrecordedRead-1)
		recent = p.ZRevRangeByScoreWithScores(ctx, k.Outbox, &redis.ZRangeBy{Min: before, Max: "+inf", Count: MaxUnrecordedRead})
		waiting = p.ZCard(ctx, k.Outbox)
		overdue = p.ZCount(ctx, k.Outbox, "-inf", "("+before) // O(log n): counted, not listed
		if sh == 0 {
			items = p.HGetAll(ctx, k.Items) // a sale of several items' (none: of one)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return activity.Live{}, 0, fmt.Errorf("%w: read: %w", ErrUnavailable, err)
	}
	m := meta.Val()
	if len(m) == 0 {
		return activity.Live{}, 0, nil
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	v := activity.Live{
		Known: true, Status: activity.Status(m["status"]), Total: num(m["total"]),
		Accepted: num(m["accepted"]), Returned: num(m["returned"]),
		GroupsOpened: num(m["groups_opened"]), GroupsSucceeded: num(m["groups_succeeded"]), GroupsFailed: num(m["groups_failed"]),
	}
	v.Remaining, _ = left.Int64()
	v.Unrecorded, v.Overdue = waiting.Val(), overdue.Val()
	listed := make(map[string]bool, len(oldest.Val()))
	for _, e := range append(oldest.Val(), recent.Val()...) {
		no, _ := e.Member.(string)
		if !listed[no] {
			listed[no] = true
			v.UnrecordedOrders = append(v.UnrecordedOrders, activity.UnrecordedOrder{No: no, Since: time.UnixMilli(int64(e.Score)).UTC()})
		}
	}
	sortBySince(v.UnrecordedOrders)
	if len(v.UnrecordedOrders) > 0 {
		v.OldestUnrecorded = v.UnrecordedOrders[0].Since
	}
	v.Paused = m["paused"] == "1"
	if items != nil {
		v.Items = itemsLive(items.Val())
	}
	return v, num(m["sale_total"]), nil
}

// sortBySince sorts us oldest first.
func sortBySince(us []activity.UnrecordedOrder) {
	sort.SliceStable(us, func(i, j int) bool { return us[i].Since.Before(us[j].Since) })
}

// listedEnds keeps of us (oldest first) what MaxUnrecordedRead lists: the
// oldest, and the newest of those at or after cutoff.
func listedEnds(us []activity.UnrecordedOrder, cutoff time.Time) []activity.UnrecordedOrder {
	within := sort.Search(len(us), func(i int) bool { return !us[i].Since.Before(cutoff) })
	from := max(within, len(us)-MaxUnrecordedRead)
	if from <= MaxUnrecordedRead {
		return us
	}
	return append(us[:MaxUnrecordedRead:MaxUnrecordedRead], us[from:]...)
}

// Version returns the version of activity id's rules Redis holds (the
// activity's version in MySQL when it was last loaded), and false when
// Redis holds no sale of that id (never loaded, or its records expired).
// It is shard 0's: a load goes through shard 0 last, so shard 0 at a
// version means every shard took that load (or a newer one).
func (s *Keeper) Version(ctx context.Context, id int64) (int64, bool, error) {
	m, err := s.rdb.HMGet(ctx, rediskeys.For(id).Meta, "status", "version").Result()
	if err != nil {
		return 0, false, fmt.Errorf("%w: version: %w", ErrUnavailable, err)
	}
	if m[0] == nil {
		return 0, false, nil
	}
	v, _ := m[1].(string)
	n, _ := strconv.ParseInt(v, 10, 64) // a meta from before versions: 0, older than any
	return n, true, nil
}

// Remaining returns the units activity id has left (0 when it was never
// loaded): over every shard, with those on their way between shards.
func (s *Keeper) Remaining(ctx context.Context, id int64) (int64, error) {
	m, err := s.RemainingMany(ctx, []int64{id})
	return m[id], err
}

// RemainingMany returns the units each of activities ids has left, read
// in one pipeline. A sharded sale's is its total less what each shard sold
// (Read says why: exact while units move between shards). An activity
// that was never loaded (a draft), or whose live records expired, is left
// out.
func (s *Keeper) RemainingMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	type read struct {
		id    int64
		shard int
		get   *redis.StringCmd
		meta  *redis.SliceCmd // a sharded sale's: its allotment, and the sale's total
	}
	var reads []*read
	counts := make([]int, len(ids))
	for i, id := range ids {
		n, err := s.Shards(ctx, id)
		if err != nil {
			return nil, err
		}
		counts[i] = n
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			for sh := 0; sh < counts[i]; sh++ {
				k := rediskeys.ForShard(id, sh, counts[i])
				r := &read{id: id, shard: sh, get: p.Get(ctx, k.Stock)}
				if counts[i] > 1 {
					r.meta = p.HMGet(ctx, k.Meta, "total", "sale_total")
				}
				reads = append(reads, r)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: read: %w", ErrUnavailable, err)
	}
	num := func(v any) int64 { x, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64); return x }
	saleTotal := map[int64]int64{}
	for _, r := range reads {
		left, err := r.get.Int64()
		if err != nil {
			continue
		}
		if r.meta == nil {
			out[r.id] += left
			continue
		}
		m := r.meta.Val()
		if len(m) == 2 {
			out[r.id] -= num(m[0]) - left // what the shard sold
			if t := num(m[1]); t > 0 && r.shard == 0 {
				saleTotal[r.id] = t // shard 0's: restocks reach it first
			}
		}
	}
	for id, t := range saleTotal {
		out[id] += t
	}
	return out, nil
}

// SoldOut reports whether this process currently refuses activity id
// locally as sold out.
func (s *Keeper) SoldOut(id int64) bool { return s.soldOut.is(id, "") }

// ItemSoldOut reports whether this process currently refuses item sku of
// activity id locally as sold out (a sale of several items; the whole
// sale's flag is SoldOut's).
func (s *Keeper) ItemSoldOut(id int64, sku string) bool { return s.soldOut.is(id, sku) }

// MarkItemSoldOut sets the local sold-out flag of item sku of activity id
// (the order path learns it from its accept script: none of it left).
// A restock notice of the sale clears it with the sale's.
func (s *Keeper) MarkItemSoldOut(id int64, sku string) { s.soldOut.set(id, sku) }

// WatchRestock clears local sold-out flags when another process gives units
// back. It runs until ctx ends; run it in the background of any process that
// accepts orders. A dropped connection costs at most SoldOutTTL of refusals.
func (s *Keeper) WatchRestock(ctx context.Context, log *slog.Logger) {
	ps := s.rdb.PSubscribe(ctx, rediskeys.RestockPattern)
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if id, ok := rediskeys.ActivityOfRestock(m.Channel); ok {
				s.soldOut.clear(id)
			} else if log != nil {
				log.Warn("stock: restock notice on an unexpected channel", "channel", m.Channel)
			}
		}
	}
}

// MarkSoldOut sets activity id's local sold-out flag (the order path learns
// it from its accept script: none left).
func (s *Keeper) MarkSoldOut(id int64) { s.soldOut.set(id, "") }
