// Package rediskeys builds every Redis key and channel name of activities,
// orders and rate limits (the lock library keeps its own, asynq its own).
// Everything of one activity, its orders included, shares the hash tag
// {act:<id>}, so every script touches a single Redis Cluster slot.
package rediskeys

import "strconv"

// Activity are one activity's keys.
type Activity struct {
	ID      int64
	Meta    string // hash: status, window, limit, total, price, pay_ttl_ms, counters
	Stock   string // units left
	Users   string // hash: user id -> units held
	Outbox  string // stream: orders whose latest state (accepted, paid, ...) is not yet in MySQL
	Restock string // pub/sub channel: units came back to a sold-out sale
	// Watching is a sorted set of the clients whose heartbeat says they
	// watch the activity, scored by their last heartbeat (internal/presence).
	Watching string
	tag      string
}

// For returns activity id's keys.
func For(id int64) Activity {
	tag := "fs:{act:" + strconv.FormatInt(id, 10) + "}"
	return Activity{
		ID: id, tag: tag,
		Meta: tag + ":meta", Stock: tag + ":stock", Users: tag + ":users",
		Outbox: tag + ":outbox", Restock: tag + ":restock", Watching: tag + ":watching",
	}
}

// Order is the hash of order no (an order of this activity).
func (a Activity) Order(no string) string { return a.tag + ":o:" + no }

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

// Idempotency maps a user's Idempotency-Key to the order it created.
func (a Activity) Idempotency(userID int64, key string) string {
	return a.tag + ":idem:" + strconv.FormatInt(userID, 10) + ":" + key
}

// GroupIdempotency maps a user's Idempotency-Key of opening ("open") or
// joining ("join") a group to the order it created. Apart from an order's
// key whatever the key holds: an order's starts with the user's digits.
func (a Activity) GroupIdempotency(op string, userID int64, key string) string {
	return a.tag + ":idem:" + op + ":" + strconv.FormatInt(userID, 10) + ":" + key
}

// PresenceAll is the sorted set of every client online, scored by its last
// heartbeat (internal/presence).
const PresenceAll = "fs:presence"

// AckProbe is the key written only to wait for replicas to catch up with
// it (redisbatch.Replicated), on a single primary.
const AckProbe = "fs:ack-probe"

// RestockPattern matches every activity's restock channel.
const RestockPattern = "fs:{act:*}:restock"

// ActivityOfRestock reads the activity id back out of a restock channel name.
func ActivityOfRestock(ch string) (int64, bool) {
	const prefix, suffix = "fs:{act:", "}:restock"
	if len(ch) <= len(prefix)+len(suffix) || ch[:len(prefix)] != prefix || ch[len(ch)-len(suffix):] != suffix {
		return 0, false
	}
	id, err := strconv.ParseInt(ch[len(prefix):len(ch)-len(suffix)], 10, 64)
	return id, err == nil
}

// RateLimit is the rate limiter's key of one client in one scope ("ip",
// "user"). go-redis/redis_rate prefixes it with "rate:", so the key in
// Redis is "rate:fs:rl:<scope>:<who>".
func RateLimit(scope, who string) string { return "fs:rl:" + scope + ":" + who }

// RateLimitStored is RateLimit's key as redis_rate stores it: for scripts
// that share its buckets (redisstore's rate_limit.lua).
func RateLimitStored(scope, who string) string { return "rate:" + RateLimit(scope, who) }
