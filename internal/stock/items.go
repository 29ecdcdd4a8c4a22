package stock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/refusal"
)

var takeUnitsScript = lua.Script("stock_take")

// itemsLive reads a sale of several items' figures out of its items hash
// (rediskeys.Activity.Items), ordered by SKU; nil for none.
func itemsLive(h map[string]string) []activity.ItemLive {
	if len(h) == 0 {
		return nil
	}
	by := map[string]*activity.ItemLive{}
	item := func(sku string) *activity.ItemLive {
		it := by[sku]
		if it == nil {
			it = &activity.ItemLive{SKU: sku}
			by[sku] = it
		}
		return it
	}
	for f, v := range h {
		n, _ := strconv.ParseInt(v, 10, 64)
		if sku, ok := strings.CutPrefix(f, "left:"); ok {
			item(sku).Remaining = n
		} else if sku, ok := strings.CutPrefix(f, "total:"); ok {
			item(sku).Total = n
		}
	}
	out := make([]activity.ItemLive, 0, len(by))
	for _, it := range by {
		out = append(out, *it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SKU < out[j].SKU })
	return out
}

// ErrShort: a removal asked for more units of an item than are unsold
// (Take); a refusal of kind activity.ErrConflict.
var ErrShort = errors.New("stock: fewer units unsold than asked")

// maxTakeTries bounds Take's tries: a load of the version asked for, or a
// pull into shard 0, between two.
const maxTakeTries = 4

// Take removes units (from 1) of item sku from sale a, which must be the
// activity as MySQL holds it under its row lock (its version is checked
// against Redis's, and loaded first when Redis is behind): never more than
// are left. A sharded sale's units are taken from shard 0, after pulling
// them there from the others if shard 0 holds too few (so what is unsold
// anywhere can be removed). Refusals: a refusal of kind
// activity.ErrConflict wrapping ErrShort (fewer unsold than asked, nothing
// taken) or saying the sale is not in Redis; ErrUnavailable.
func (s *Keeper) Take(ctx context.Context, a activity.Activity, sku string, units int64) (int64, error) {
	k := rediskeys.For(a.ID)
	loaded, pulled := false, false
	for try := 0; try < maxTakeTries; try++ {
		res, err := s.runAcked(ctx, takeUnitsScript, []string{k.Meta, k.Stock, k.Items}, sku, units, a.Version).Int64Slice()
		if err != nil || len(res) != 2 {
			return 0, fmt.Errorf("%w: stock_take.lua: %v %w", ErrUnavailable, res, err)
		}
		switch code, left := res[0], res[1]; {
		case code == 0:
			return left, nil
		case code == 1 && a.ShardCount() > 1 && !pulled:
			// Shard 0 is short: what the others hold is pulled there first.
			pulled = true
			if _, _, err := s.Pull(ctx, a.ID, 0, units-left); err != nil {
				return 0, fmt.Errorf("%w: pull into shard 0: %w", ErrUnavailable, err)
			}
		case code == 1:
			return 0, fmt.Errorf("%w: %w", refusal.OfField(activity.ErrConflict, "add",
				"item %q has %d units unsold: that many at most can be removed", sku, left), ErrShort)
		case code == 2:
			return 0, refusal.New(activity.ErrConflict, "the sale is not in Redis (publish it again)")
		case code == 3 && !loaded:
			// Redis is behind MySQL (a load that failed): brought to MySQL's
			// version first, under the same row lock.
			loaded = true
			if _, err := s.Load(ctx, a); err != nil {
				return 0, err
			}
		case code == 5:
			return 0, refusal.OfField(activity.ErrInvalid, "item", "the sale has no item %q in Redis", sku)
		default:
			return 0, fmt.Errorf("%w: Redis holds another version of activity %d than MySQL's %d; try again", ErrUnavailable, a.ID, a.Version)
		}
	}
	return 0, fmt.Errorf("%w: units of item %q were taken by orders each time they were pulled; try again", ErrUnavailable, sku)
}

// ItemsLeft returns what sale a has left in all, and of each of its items
// by SKU: a sale of several items' read in one round trip (its stock and
// its items' units left, one snapshot), a sale of one item's its
// Remaining for both (of every shard).
func (s *Keeper) ItemsLeft(ctx context.Context, a activity.Activity) (int64, map[string]int64, error) {
	items := a.ItemList()
	if len(items) == 1 {
		left, err := s.Remaining(ctx, a.ID)
		return left, map[string]int64{items[0].SKU: left}, err
	}
	k := rediskeys.For(a.ID)
	fields := make([]string, len(items))
	for i, it := range items {
		fields[i] = "left:" + it.SKU
	}
	var get *redis.StringCmd
	var lefts *redis.SliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k.Stock)
		lefts = p.HMGet(ctx, k.Items, fields...)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, fmt.Errorf("%w: read items: %w", ErrUnavailable, err)
	}
	total, _ := get.Int64()
	out := make(map[string]int64, len(items))
	for i, v := range lefts.Val() {
		str, _ := v.(string)
		out[items[i].SKU], _ = strconv.ParseInt(str, 10, 64)
	}
	return total, out, nil
}
