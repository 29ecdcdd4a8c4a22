// Package order is the order domain: flash-sale orders and group buys, their
// rules, and the Service that places them and moves them on — pending
// payment, paid, cancelled (by the user or when its payment time runs out),
// refunded.
//
// It imports no adapter. It declares what it needs as small interfaces
// (ports.go) and others implement them: internal/redisstore keeps live
// orders and groups in Redis with atomic Lua scripts, internal/tasks queues
// and runs the background work on asynq (persisting into MySQL, payment
// timeouts, settling groups), internal/mysqlstore is the record in MySQL.
// `go list -deps ./internal/order` shows no go-redis, asynq or gorm.
package order

import (
	"encoding/base32"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/refusal"
)

// Status is where an order is in its life.
type Status string

// The statuses. pending_payment → paid, or pending_payment → cancelled; a
// group buy's paid order may become refunded. Never backwards.
const (
	PendingPayment Status = "pending_payment"
	Paid           Status = "paid"
	Cancelled      Status = "cancelled"
	Refunded       Status = "refunded"
)

// Order is one shopper's order in one activity.
type Order struct {
	No          string
	ActivityID  int64
	UserID      int64
	Quantity    int
	PriceCents  int64
	AmountCents int64
	Status      Status
	Fence       int64 // of the last status change (0 at acceptance)
	CreatedAt   time.Time
	PayBy       time.Time // unpaid after this, it is cancelled
	PaidAt      time.Time // zero unless paid
	CancelledAt time.Time // zero unless cancelled
	Persisted   bool      // recorded in MySQL
	GroupID     string    // the group buy's group, "" for a flash sale
	PaymentID   string    // the provider's payment that paid it; "" unpaid (or paid before payments were real)
	// Item is the SKU of the sale's item the order is for (its PriceCents
	// is the item's); "" for an order made before items, of its sale's
	// one item.
	Item string
	// CancelReason says why a cancelled order was: CancelShopper,
	// CancelTimeout or CancelGroupFailed; "" for an order not cancelled,
	// or cancelled before the record carried it (docs/webhooks.md).
	CancelReason CancelReason
	// RefundedAt is when a refunded order was refunded (zero unless
	// refunded; CancelledAt holds the same time, the order's end).
	RefundedAt time.Time
	// SoldOutVersion is, on the order that took a flash sale's last unit,
	// the sale's version then (its activity.sold_out's sequence); 0 on
	// every other order (docs/webhooks.md).
	SoldOutVersion int64
}

// CancelReason says why an order was cancelled (its record's "reason").
type CancelReason string

// The reasons a cancel records (transition.lua: cancel, expire, settle).
const (
	CancelShopper     CancelReason = "shopper"      // the shopper cancelled it
	CancelTimeout     CancelReason = "timeout"      // its payment time ran out
	CancelGroupFailed CancelReason = "group_failed" // its group did not fill in time
)

// MaxQuantity bounds one order; the activity's per-user limit bounds it further.
const MaxQuantity = 1000

var noEncoding = base32.NewEncoding(noChars32).WithPadding(base32.NoPadding)

// noChars32 is noEncoding's alphabet (Crockford's base32).
const noChars32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// noValue is each character's value in noEncoding, and noNone for a byte
// that is not one of its characters.
var noValue = func() (t [256]byte) {
	for i := range t {
		t[i] = noNone
	}
	for i, c := range []byte(noChars32) {
		t[c] = byte(i)
	}
	return t
}()

const noNone = 0xff

// The random part of a number: 48 bits of milliseconds, then 80 random
// bits (26 characters). Numbers made before had 32 random bits (16
// characters) and still parse: 32 bits were too few for replicas drawing
// millions of numbers a second (a collision was a birthday away).
const (
	noChars       = 26
	legacyNoChars = 16
)

// NewNo returns a new order number (group ids have the same form): the
// activity id, a dash, and 26 characters of time-ordered randomness
// ("42-0CF3YH0AB7J8Q2RS5DW1K9X3TG"). The activity id lets every key of the
// order share its activity's Redis slot.
//
// The 80 bits come from math/rand/v2's generator (the runtime's ChaCha8,
// seeded from the OS for each thread), not crypto/rand: a number must be
// unique, not secret — an order is answered only to its owner (anyone
// else's read is a 404), a forming group is listed to every shopper, and
// a number drawn twice is refused by the accept and drawn again
// (retryTaken). With crypto/rand, a number was 1.4 µs of a fresh shopper's
// order in the api's profile at a launch (issue 43); alone, 304 ns against
// 193 (BenchmarkNewNo).
func NewNo(activityID int64) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	binary.BigEndian.PutUint64(b[6:], rand.Uint64())
	binary.BigEndian.PutUint16(b[14:], uint16(rand.Uint32()))
	var out [20 + 1 + noChars]byte // the longest int64, the dash, the characters
	n := len(strconv.AppendInt(out[:0], activityID, 10))
	out[n] = '-'
	noEncoding.Encode(out[n+1:], b[:])
	return string(out[:n+1+noChars])
}

// NoTime returns the 48 bits of milliseconds a number NewNo drew begins
// with (a group id's too), and false for a number it cannot read them
// from (malformed, or of the older 16-character form, which has none).
func NoTime(no string) (ms uint64, ok bool) {
	if _, _, _, err := ParseNoShard(no); err != nil {
		return 0, false
	}
	_, rest, _ := strings.Cut(no, "-")
	if len(rest) != noChars {
		return 0, false
	}
	// The first 10 characters are 50 bits: the 48 of the time, then 2.
	for i := 0; i < 10; i++ {
		ms = ms<<5 | uint64(noValue[rest[i]])
	}
	return ms >> 2, true
}

// NoPrefixAt is what the characters after the dash of every number NewNo
// drew at millisecond ms begin with: the 45 bits of its 48 that the first
// 9 characters hold, so the numbers of 8 milliseconds share it (a lookup
// by time: mysqlstore's order.accepted by event id).
func NoPrefixAt(ms uint64) string {
	var b [16]byte
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	var out [noChars]byte
	noEncoding.Encode(out[:], b[:])
	return string(out[:9])
}

// InShard returns order number no, as NewNo drew it, as the number of an
// order in shard shard of its sale of shards shards (activity.Shards):
// both after the activity id, each after a dot,
// "42.3.6-0CF3YH0AB7J8Q2RS5DW1K9X3TG", so reading, paying, cancelling and
// timing out the order go to its shard's keys (rediskeys.ForShard) with
// no lookup. Shard 0 (every sale of one shard) keeps the number as it is.
func InShard(no string, shard, shards int) string {
	if shard <= 0 || shards < 2 {
		return no
	}
	act, rest, _ := strings.Cut(no, "-")
	return act + "." + strconv.Itoa(shard) + "." + strconv.Itoa(shards) + "-" + rest
}

// ParseNo validates an order number (or group id) and returns its activity id.
func ParseNo(no string) (int64, error) {
	id, _, _, err := ParseNoShard(no)
	return id, err
}

// ParseNoShard validates an order number (or group id) and returns its
// activity id, its shard and its sale's shards (InShard; 0 and 1 for a
// number of shard 0).
func ParseNoShard(no string) (id int64, shard, shards int, err error) {
	// Called for every order a batch touches (the worker's reads and
	// marks, by the hundred): it allocates nothing but its refusal.
	bad := func() (int64, int, int, error) {
		return 0, 0, 0, refusal.New(ErrInvalid, "order number %q is malformed", no)
	}
	head, rest, ok := strings.Cut(no, "-")
	if !ok || (len(rest) != noChars && len(rest) != legacyNoChars) || len(no) > 48 {
		return bad()
	}
	first, more, sharded := strings.Cut(head, ".")
	id, ok = canonicalInt(first)
	if !ok || id <= 0 {
		return bad()
	}
	shard, shards = 0, 1
	if sharded {
		s1, s2, ok2 := strings.Cut(more, ".")
		n1, ok := canonicalInt(s1)
		n2, okN := canonicalInt(s2)
		if !ok2 || !ok || !okN || n1 < 1 || n1 >= n2 || n2 > maxShards {
			return bad()
		}
		shard, shards = int(n1), int(n2)
	}
	for i := 0; i < len(rest); i++ {
		if noValue[rest[i]] == noNone {
			return bad()
		}
	}
	return id, shard, shards, nil
}

// canonicalInt reads s as a decimal integer written as strconv writes it:
// digits alone, no sign, no leading zero ("0" itself aside), within int64.
func canonicalInt(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// maxShards bounds the shard in a number (activity.MaxShards).
const maxShards = 64

// ValidIdempotencyKey reports whether k is usable as an Idempotency-Key:
// 1 to 64 printable ASCII characters.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// OutboxEntry is an order whose latest state — accepted, or changed (paid,
// cancelled, ...) since it was recorded — is not in MySQL yet. Every such
// order has one entry in its activity's outbox until the worker records
// it, so a task lost on the way is found again (the reconciler).
type OutboxEntry struct {
	ID    string // the entry's own id
	No    string
	Since time.Time // when the order was accepted or changed (Redis time)
}
