// Package order is the order domain: placing an order under the per-user
// lock, accepting it atomically in Redis, and its life — pending payment,
// paid, cancelled (by the user or when its payment time runs out), refunded —
// through to MySQL, where the worker records it exactly once.
package order

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
}

// Errors. Sale refusals (sold out, limit, window) are activity's errors.
var (
	ErrNotFound = errors.New("order: not found")
	ErrInvalid  = errors.New("order: invalid request")
	// ErrConflict: the order is not in a state that allows the change (paying
	// a cancelled order, cancelling a paid one, paying after the deadline).
	ErrConflict = errors.New("order: conflict")
	// ErrBusy: another request of the same user or order held the lock for
	// longer than this one could wait.
	ErrBusy = errors.New("order: busy, try again")
	// ErrUnavailable wraps a failure of Redis or the task queue.
	ErrUnavailable = errors.New("order: unavailable")

	// ErrWrongType: a flash-sale order on a group buy, or a group on a flash sale.
	ErrWrongType = errors.New("order: not this kind of activity")
	// Group buys.
	ErrGroupNotFound = errors.New("order: no such group")
	ErrGroupClosed   = errors.New("order: the group is closed") // succeeded, failed, or past its deadline
	ErrGroupFull     = errors.New("order: the group is full")
	ErrAlreadyMember = errors.New("order: already a member of the group")
)

// MaxQuantity bounds one order; the activity's per-user limit bounds it further.
const MaxQuantity = 1000

var noEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// NewNo returns a new order number: the activity id, a dash, and 16
// characters of time-ordered randomness ("42-0CF3YH0AB7J8Q2RS"). The
// activity id lets every key of the order share its activity's Redis slot.
func NewNo(activityID int64) string {
	var b [10]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- { // 48 bits of milliseconds, then 32 random bits
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return strconv.FormatInt(activityID, 10) + "-" + noEncoding.EncodeToString(b[:])
}

// ParseNo validates an order number and returns its activity id.
func ParseNo(no string) (int64, error) {
	act, rest, ok := strings.Cut(no, "-")
	if !ok || len(rest) != 16 || len(no) > 40 {
		return 0, fmt.Errorf("%w: order number %q", ErrInvalid, no)
	}
	id, err := strconv.ParseInt(act, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != act {
		return 0, fmt.Errorf("%w: order number %q", ErrInvalid, no)
	}
	if _, err := noEncoding.DecodeString(rest); err != nil {
		return 0, fmt.Errorf("%w: order number %q", ErrInvalid, no)
	}
	return id, nil
}

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
