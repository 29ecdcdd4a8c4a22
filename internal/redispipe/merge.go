package redispipe

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/rediskeys"
)

// mergeGroup is the calls of one pipeline sent as one run of their merged
// script.
type mergeGroup struct {
	calls []*call
	cmd   *redis.Cmd
}

// maxMerged bounds the calls of one run: Lua's unpack (of a batch's fields
// into one HSET, say) stops at about 8,000 values.
const maxMerged = 128

// queue sends c's script into pipe: a call of a plain script on its own, a
// call of a merged script into its group (on a cluster client, the calls
// of its group and slot; a call whose keys are of several slots, or none,
// runs alone and gets Redis's own answer).
func (b *Pipe) queue(ctx context.Context, pipe redis.Pipeliner, c *call, groups *map[string]*mergeGroup, order *[]*mergeGroup) {
	if c.merged == nil {
		c.cmd = pipe.EvalSha(ctx, c.sha, c.keys, c.args...)
		return
	}
	if *groups == nil {
		*groups = map[string]*mergeGroup{}
	}
	key := c.sha + "\x00" + c.group
	if b.cluster {
		// A cluster client merges the calls of one slot: their one run
		// goes to the master holding it, as each call would have. A call
		// of several slots (or none) runs alone, kept out of the groups so
		// that no later call joins it.
		slot, ok := oneSlot(c.keys)
		if !ok {
			*order = append(*order, &mergeGroup{calls: []*call{c}})
			return
		}
		key += "\x00" + strconv.Itoa(int(slot))
	}
	g := (*groups)[key]
	if g == nil || len(g.calls) >= maxMerged {
		g = &mergeGroup{}
		(*groups)[key] = g
		*order = append(*order, g)
	}
	g.calls = append(g.calls, c)
}

// send queues the group's one run into pipe.
func (g *mergeGroup) send(ctx context.Context, pipe redis.Pipeliner) {
	calls := make([]luascript.Call, len(g.calls))
	for i, c := range g.calls {
		calls[i] = luascript.Call{Keys: c.keys, Args: c.args}
	}
	keys, args := luascript.Pack(calls)
	g.cmd = pipe.EvalSha(ctx, g.calls[0].sha, keys, args...)
}

// answer hands each call of the group its reply.
func (g *mergeGroup) answer() {
	for i, cmd := range luascript.Answers(g.cmd, len(g.calls)) {
		g.calls[i].cmd = cmd
	}
}

// oneSlot is the Redis Cluster slot of keys, if they are all of one.
func oneSlot(keys []string) (uint16, bool) {
	if len(keys) == 0 {
		return 0, false
	}
	slot := rediskeys.Slot(keys[0])
	for _, k := range keys[1:] {
		if rediskeys.Slot(k) != slot {
			return 0, false
		}
	}
	return slot, true
}
