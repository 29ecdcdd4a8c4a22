// Package rediskeys builds every Redis key and channel name of activities,
// orders and rate limits, and names the prefixes of the libraries that lay
// out keys of their own: the lock library's (LockPrefix; internal/lock
// keeps its layout under it) and asynq's (its own "asynq:").
// Everything of one activity, its orders included, shares the hash tag
// {act:<id>}, so every script touches a single Redis Cluster slot; a sale
// split into shards (activity.Shards) has one tag a shard: {act:<id>} for
// shard 0, {act:<id>:<shard>:<k>} for the others (ShardTag).
package rediskeys

import (
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/flashsale/flashsale/internal/memo"
)

// Activity are one activity's keys.
type Activity struct {
	ID    int64
	Meta  string // hash: status, window, limit, total, price, pay_ttl_ms, counters
	Stock string // units left
	Users string // hash: user id -> units held
	// Orders is the sale's order records: order no -> record (one field
	// per order; redisstore's lib_record.lua and record.go say its form).
	Orders string
	// Outbox is a sorted set of the orders whose latest state (accepted,
	// paid, ...) is not yet in MySQL, scored by when (unix ms) it was.
	Outbox string
	// Idem maps an Idempotency-Key's field (IdempotencyField,
	// GroupIdempotencyField) to the order it made.
	Idem string
	// Items is a sale of several items' hash of them (stock's load.lua
	// writes it; a sale of one item has none: its item is the meta's sku,
	// its stock Stock): per item, by SKU, "p:<sku>" its price, "l:<sku>"
	// its own per-user limit (absent: none), "left:<sku>" its units left
	// and "total:<sku>" its units in all (created, restocked). Stock is
	// then the sum of their units left.
	Items string
	// ItemUsers maps "<user id>:<sku>" (ItemUserField) to the units the
	// user holds of that item, in a sale of several items, for the items
	// with a limit of their own only (Users holds their units across the
	// items).
	ItemUsers string
	Restock   string // pub/sub channel: units came back to a sold-out sale
	// Watching is a sorted set of the clients whose heartbeat says they
	// watch the activity, scored by their last heartbeat (internal/presence).
	Watching string
	// Payments maps an order no to its payment at the provider (JSON:
	// redisstore/payments.go): one per order, kept as long as the sale.
	Payments string
	// Samples is a sorted set of the sale's recent live figures, scored by
	// when (unix ms), member "ms:accepted:lag_ms" (redisstore/samples.go):
	// the console's charts' last minutes.
	Samples string
	// Transit maps the id of a transfer of units out of this shard that is
	// not finished to "<to shard>:<units>:<taken ms>"; Taken is the set of
	// transfers ever taken out of it, Applied of those given into it, so a
	// transfer is taken once and given once however often a step is sent
	// (internal/stock's transfer_take.lua, transfer_give.lua).
	Transit, Taken, Applied string
	// Shard is which of the sale's shards these keys are (0 for a sale of
	// one shard).
	Shard int
	tag   string
}

// For returns activity id's keys: a sale of one shard, or shard 0 of a
// sharded sale (which holds the sale-wide keys: Watching, Samples, and
// the meta that says how many shards there are; each shard keeps its own
// orders' payments).
func For(id int64) Activity { return ForShard(id, 0, 1) }

// ForShard returns the keys of shard shard of activity id, a sale of
// shards shards. Shard 0's are For's, so a sale of one shard and every sale
// made before shards existed keep their keys; shard s > 0's tag is
// ShardTag's. Restock is the sale's one channel, whichever shard.
func ForShard(id int64, shard, shards int) Activity {
	if shard == 0 {
		shards = 1 // shard 0's keys are the same whatever the count
	}
	return keysCache.Get(saleShard{id, shard, shards})
}

// keysCache remembers the keys ForShard built, one sale's shard a slot (a
// memo.Cache: bounded, so requests naming any activity id, existing or
// not, cannot grow it): an order's request asked for its sale's keys once
// or twice, and building them — fifteen strings — was 9% of a fresh
// shopper's allocations at a launch (the fresh-shopper api's profile,
// issue 43, 2026-11-29).
var keysCache = memo.New(1024, func(s saleShard) Activity { return forShard(s.id, s.shard, s.shards) })

type saleShard struct {
	id            int64
	shard, shards int
}

// forShard builds ForShard's keys.
func forShard(id int64, shard, shards int) Activity {
	base := "fs:{act:" + strconv.FormatInt(id, 10) + "}"
	tag := base
	if shard > 0 {
		tag = "fs:{" + ShardTag(id, shard, shards) + "}"
	}
	return Activity{
		ID: id, Shard: shard, tag: tag,
		Meta: tag + ":meta", Stock: tag + ":stock", Users: tag + ":users", Orders: tag + ":orders",
		Outbox: tag + ":outbox", Idem: tag + ":idem", Items: tag + ":items", ItemUsers: tag + ":itemusers",
		Restock: base + ":restock", Watching: tag + ":watching",
		Payments: tag + ":payments", Samples: tag + ":samples", Transit: tag + ":transit", Taken: tag + ":taken", Applied: tag + ":applied",
	}
}

// ShardTag is the hash tag of shard shard of activity id, a sale of shards
// shards: "act:<id>" for shard 0, "act:<id>:<shard>:<k>" for the others,
// where k is the least number from 0 that puts the tag's slot in the
// shard's part of the slot space: of shards equal parts, shard 0's slot is
// in one, and shard s's in the s-th after it (round the ring). A cluster's
// masters own equal runs of slots (as redis-cli --cluster create and
// testenv lay them out), so a sale's shards land on its masters as evenly
// as they can — exactly evenly when the masters divide the shards: by hash
// alone,
// 3 shards on 3 masters all differ only 2 times in 9, and a master that
// carries two shards carries two thirds of the sale (docs/benchmarks.md,
// "One hot sale, many masters"). Fixed for ever: every key of a shard is
// found by it.
func ShardTag(id int64, shard, shards int) string {
	act := "act:" + strconv.FormatInt(id, 10)
	if shard == 0 || shards < 2 {
		return act
	}
	key := shardKey{id, shard, shards}
	if t, ok := shardTags.Load(key); ok {
		return t.(string)
	}
	p := (int(Slot(act))*shards/slots + shard) % shards
	lo, hi := p*slots/shards, (p+1)*slots/shards
	prefix := act + ":" + strconv.Itoa(shard) + ":"
	var tag string
	for k := 0; ; k++ {
		tag = prefix + strconv.Itoa(k)
		if s := int(Slot(tag)); s >= lo && s < hi {
			break
		}
	}
	shardTags.Store(key, tag)
	return tag
}

// slots is Redis Cluster's count of hash slots.
const slots = 16384

type shardKey struct {
	id            int64
	shard, shards int
}

var shardTags sync.Map // shardKey -> tag

// Slot is the Redis Cluster hash slot of a key (or of a hash tag's
// content): CRC16 (XMODEM) modulo 16384, of the tag's content when the key
// has one.
func Slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % slots
}

// ShardLockTable is the lock table (internal/lock's InTable) of the
// per-user order locks of shard shard of a sharded sale (activity.Shards
// > 1): the shard's own hash tag (ShardTag), so on a Redis Cluster a
// shard's locks are on the shard's node and one hot sale's locks spread
// with its shards. (A sale of one shard keeps its table "order-user:<id>",
// order.Service's.)
func ShardLockTable(id int64, shard, shards int) string { return ShardTag(id, shard, shards) }

// LegacyOrder is where order no's record was kept until 2026-11-24: a
// hash of its own (redisstore.Upgrade moves it into Orders).
func (a Activity) LegacyOrder(no string) string { return a.tag + ":o:" + no }

// RateLimit is the base key, in this shard's slot, of the rate limit of a
// scope's clients ordering in this sale on Redis Cluster (redisstore's
// rate_limit.lua keeps its windows under it, "<base>:<window length>:<window>",
// in the same slot), so the order's script charges it with the accept, as
// it charges the one budget of RateLimit on a single server or Sentinel.
func (a Activity) RateLimit(scope string) string { return a.tag + ":rl:" + scope }

// Group is the hash of group id (a group buy's group of this activity).
func (a Activity) Group(id string) string { return a.tag + ":g:" + id }

// GroupMembers maps a group's members (user id) to their orders.
func (a Activity) GroupMembers(id string) string { return a.tag + ":gm:" + id }

// Forming is the activity's groups with a free slot, scored by deadline.
func (a Activity) Forming() string { return a.tag + ":groups:forming" }

// Unsettled is every group of the activity not settled yet — forming (full
// or not), or succeeded before its deadline — scored by deadline: the
// reconciler settles the overdue ones whose settle task was never queued
// (settling a succeeded group records its row in MySQL once more).
func (a Activity) Unsettled() string { return a.tag + ":groups:unsettled" }

// IdempotencyField is the field of Idem that maps a user's Idempotency-Key
// of an order to the order it created.
func IdempotencyField(userID int64, key string) string {
	return strconv.FormatInt(userID, 10) + ":" + key
}

// ItemUserField is the field of ItemUsers that holds the units userID
// holds of item sku.
func ItemUserField(userID int64, sku string) string { return strconv.FormatInt(userID, 10) + ":" + sku }

// OpenIdempotencyField is the field of Idem that maps a user's
// Idempotency-Key of opening a group to the order it created. Apart from
// an order's whatever the key holds: an order's starts with the user's
// digits.
func OpenIdempotencyField(userID int64, key string) string {
	return "open:" + strconv.FormatInt(userID, 10) + ":" + key
}

// JoinIdempotencyField is the field of Idem that maps a user's
// Idempotency-Key of joining group gid to the order it created: scoped to
// the group, so the same key sent to join another group is another
// request, not a replay of the first (until 2026-11-26 it was scoped to
// the sale, "join:<user>:<key>", and such a request got the first group's
// order back).
func JoinIdempotencyField(gid string, userID int64, key string) string {
	return "join:" + gid + ":" + strconv.FormatInt(userID, 10) + ":" + key
}

// LegacyIdempotencyPrefix starts the keys an Idempotency-Key was kept in
// until 2026-11-24, one string each: the tag, ":idem:", then a field of Idem.
func (a Activity) LegacyIdempotencyPrefix() string { return a.tag + ":idem:" }

// LockPrefix starts every key and channel of the lock library
// (lock.Config.Prefix): a mutex is "fs:lock:{<name>}", the per-user order
// locks of activity 42 the table "fs:ltab:{order-user:42}" (internal/lock,
// keys.go, lays them out; docs/locking.md).
const LockPrefix = "fs:"

// MetaPattern matches every activity's meta hash (SCAN), the keys of the
// sales Redis holds; ActivityOfMeta reads the id back (and refuses the
// metas of shards 1 and on: a sale is named once, by its shard 0).
const MetaPattern = "fs:{act:*}:meta"

// ActivityOfMeta reads the activity id back out of a meta key.
func ActivityOfMeta(key string) (int64, bool) {
	return activityOf(key, ":meta")
}

// WebhookEvent is the key that says a provider's webhook event was
// handled (kept a week; providers retry for three days). No hash tag:
// events come one by one, each its own key.
func WebhookEvent(provider, id string) string { return "fs:webhook:" + provider + ":" + id }

// PresenceAll is the sorted set of every client online, scored by its last
// heartbeat (internal/presence).
const PresenceAll = "fs:presence"

// AckProbe is the key written only to wait for replicas to catch up with
// it (redispipe.Replicated), on a single primary.
const AckProbe = "fs:ack-probe"

// RestockPattern matches every activity's restock channel.
const RestockPattern = "fs:{act:*}:restock"

// ActivityOfRestock reads the activity id back out of a restock channel name.
func ActivityOfRestock(ch string) (int64, bool) { return activityOf(ch, ":restock") }

// activityOf reads the id out of "fs:{act:<id>}<suffix>".
func activityOf(name, suffix string) (int64, bool) {
	const prefix = "fs:{act:"
	suffix = "}" + suffix
	if len(name) <= len(prefix)+len(suffix) || name[:len(prefix)] != prefix || name[len(name)-len(suffix):] != suffix {
		return 0, false
	}
	id, err := strconv.ParseInt(name[len(prefix):len(name)-len(suffix)], 10, 64)
	return id, err == nil && id > 0
}

// RateLimit is the rate limiter's base key for client who in scope ("ip",
// "user"): redisstore's rate_limit.lua keeps the clients' state in hashes
// per time window under it, "<base>:<window length>:<window>", which its
// hash tag keeps in the base's Redis Cluster slot. With shards > 1 the
// clients of a scope are spread over that many bases by a hash of who, so
// that on a cluster one scope's limits are not all one node's work:
// "fs:rl:{<scope>}" with one shard, "fs:rl:{<scope>:<shard>}" with more.
func RateLimit(scope, who string, shards int) string {
	if shards <= 1 {
		return "fs:rl:{" + scope + "}"
	}
	h := fnv.New32a()
	h.Write([]byte(who))
	return "fs:rl:{" + scope + ":" + strconv.Itoa(int(h.Sum32()%uint32(shards))) + "}"
}

// QueueBuckets is how many hashes a sale's waiting room spreads its
// shoppers' places over (QueueUser): 16,384, so that up to about two
// million shoppers a bucket stays within Redis's listpack encoding (128
// entries by default: a dozen bytes a shopper, not the ~70 of a hash
// table's entry; docs/waiting-room.md, "Memory"). Fixed for ever: a
// shopper's place is found by it.
const QueueBuckets = 16384

// QueueHist is the waiting room's history of its serving counter, a hash in
// the sale's slot (waitingroom's lib_queue.lua).
func (a Activity) QueueHist() string { return a.tag + ":q:hist" }

// QueueUserPrefix starts the waiting room's user buckets: QueueUser's
// prefix, which its script extends itself (same slot).
func (a Activity) QueueUserPrefix() string { return a.tag + ":q:u:" }

// QueueUser is the hash of the places of the users of bucket
// QueueBucketOf(userID) in the sale's waiting room.
func (a Activity) QueueUser(userID int64) string {
	return a.QueueUserPrefix() + strconv.Itoa(QueueBucketOf(userID))
}

// QueueSlotPrefix starts the hashes of the shuffle's slots of the early
// joiners (slot s in QueueSlotPrefix() + s/100), which queue.lua builds.
func (a Activity) QueueSlotPrefix() string { return a.tag + ":q:s:" }

// QueueBucketOf is user id's bucket: the id mod QueueBuckets (consecutive
// ids spread evenly; queue.lua computes the same from the id's digits).
func QueueBucketOf(userID int64) int { return int(uint64(userID) % QueueBuckets) }

// StreamShards is how many pub/sub channels carry the events of the
// shoppers' streams (internal/stream): a small fixed set, never one a
// client or an order. Fixed, not configured: a publisher and a hub that
// disagreed on it would lose events. Every api subscribes to all of them.
const StreamShards = 8

// StreamChannel is the pub/sub channel of stream shard i (0 ≤ i <
// StreamShards), "fs:{stream:<i>}": each shard its own hash tag, so on a
// Redis Cluster the shards' SPUBLISH/SSUBSCRIBE spread over the masters.
func StreamChannel(i int) string { return "fs:{stream:" + strconv.Itoa(i) + "}" }
