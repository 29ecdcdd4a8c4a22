// Package activity is the domain of flash sales (seckill) and group buys:
// what an activity is, the rules a valid one follows, and what may change
// once it is published. Storage (internal/mysqlstore), live stock
// (internal/stock) and HTTP (internal/httpapi) depend on it, never the
// reverse.
package activity

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale/internal/refusal"
)

// Type is what kind of sale an activity is.
type Type string

// The activity types.
const (
	Seckill  Type = "seckill"  // a flash sale: first come, first served
	GroupBuy Type = "groupbuy" // sells at the group price when a group fills
)

// Status is where an activity is in its life.
type Status string

// The statuses. An activity goes draft → published → closed, never back.
const (
	Draft     Status = "draft"
	Published Status = "published"
	Closed    Status = "closed"
)

// Activity is a flash sale or a group buy.
type Activity struct {
	ID           int64
	Type         Type
	Name         string
	SKU          string
	PriceCents   int64
	TotalStock   int
	PerUserLimit int // units one user may hold at once (cancelled ones do not count)
	StartsAt     time.Time
	EndsAt       time.Time
	PaymentTTL   time.Duration // unpaid orders are cancelled after this
	GroupSize    int           // group buys only
	GroupTTL     time.Duration // group buys only: how long a group may take to fill
	// Shards is how many Redis hash slots the sale's stock and orders are
	// spread over (1: one slot, the layout of every sale before
	// 2026-11-26). A user's orders are all in one shard (ShardOf), so the
	// per-user limit stays exact; units move between shards when one runs
	// dry (internal/stock's transfers). Set while a draft; flash sales only.
	// 0 reads as 1.
	Shards int
	// Items are what the sale sells (1 to MaxItems): variants with their
	// own stock and price, one per-user limit (PerUserLimit) across them,
	// and each its own limit if it has one. Empty: the sale's one item is
	// SKU, PriceCents and TotalStock (the form of every activity before
	// items, which clients may still send). With items, SKU and PriceCents
	// are the first item's and TotalStock their sum (Normalize); ItemList
	// reads either form.
	Items  []Item
	Status Status
	// Paused: the sale refuses new orders and groups (ErrPaused) until
	// resumed; everything else goes on (pay, cancel, timeouts,
	// persistence). Only a published sale is paused; closing ends it.
	Paused bool
	// WaitingRoom puts a waiting room in front of the sale (docs/waiting-room.md):
	// shoppers join a queue (POST /v1/activities/{id}/queue), are let in
	// AdmitPerSecond a second, and order only with the admission token it
	// gives them. Set while a draft.
	WaitingRoom bool
	// AdmitPerSecond is how many waiting shoppers are let in a second
	// (WaitingRoom only; 1 to MaxAdmitPerSecond). It may change while the
	// sale is published.
	AdmitPerSecond int
	// AdmissionTTL is how long an admission lets a shopper order
	// (WaitingRoom only). 0 reads as DefaultAdmissionTTL.
	AdmissionTTL time.Duration
	// JoinPowBits is the proof of work joining the queue needs: leading
	// zero bits of a SHA-256 (0: none; at most MaxJoinPowBits).
	JoinPowBits int
	// Version counts the activity's changes in MySQL (one more per
	// update). Loading it into Redis carries it, and Redis ignores a load
	// older than the one it holds: racing admin changes end at the latest.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Limits on what an activity may ask for. Beyond them is a mistake, not a sale.
const (
	MaxStock        = 10_000_000
	MaxPerUserLimit = 10_000
	MaxPriceCents   = 1_000_000_000_00 // one billion in the currency's unit
	MinPaymentTTL   = 10 * time.Second
	MaxPaymentTTL   = 24 * time.Hour
	MaxGroupSize    = 100
	MinGroupTTL     = 10 * time.Second
	MaxGroupTTL     = 7 * 24 * time.Hour
	MaxNameLen      = 200
	MaxSKULen       = 64
	MaxShards       = 64

	// The waiting room's bounds (docs/waiting-room.md).
	MaxAdmitPerSecond   = 100_000
	MinAdmissionTTL     = 10 * time.Second
	MaxAdmissionTTL     = time.Hour
	DefaultAdmissionTTL = 300 * time.Second
	MaxJoinPowBits      = 24

	// DefaultPaymentTTL applies when a new activity names none.
	DefaultPaymentTTL = 15 * time.Minute

	// DefaultRetention is how long a sale's live records stay in Redis after
	// the last moment anything can still act on them (RecordTTL, LiveUntil):
	// time for retried settlements and persistence, and for shoppers
	// reading their orders.
	DefaultRetention = 7 * 24 * time.Hour
)

// Errors. Each is wrapped with detail; check with errors.Is.
var (
	ErrNotFound = errors.New("activity: not found")
	ErrInvalid  = errors.New("activity: invalid")
	// ErrConflict: the request is valid in itself but not in the activity's
	// current state (a field that cannot change after publishing, closing a
	// draft, publishing a closed activity).
	ErrConflict = errors.New("activity: conflict")
)

// FieldError says which field is wrong and why.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes every FieldError an ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks the activity's own rules; it returns the first broken one
// as a *FieldError (which is an ErrInvalid).
func (a *Activity) Validate() error {
	switch a.Type {
	case Seckill, GroupBuy:
	case "":
		return invalid("type", "is required (seckill or groupbuy)")
	default:
		return invalid("type", "%q is not seckill or groupbuy", a.Type)
	}
	name := strings.TrimSpace(a.Name)
	switch {
	case name == "":
		return invalid("name", "is required")
	case utf8.RuneCountInString(name) > MaxNameLen:
		return invalid("name", "is longer than %d characters", MaxNameLen)
	case !utf8.ValidString(name):
		return invalid("name", "is not valid UTF-8")
	}
	if err := a.validateItems(); err != nil {
		return err
	}
	if a.PerUserLimit <= 0 || a.PerUserLimit > MaxPerUserLimit {
		return invalid("per_user_limit", "must be between 1 and %d", MaxPerUserLimit)
	}
	switch {
	case a.StartsAt.IsZero():
		return invalid("starts_at", "is required")
	case a.EndsAt.IsZero():
		return invalid("ends_at", "is required")
	case !a.EndsAt.After(a.StartsAt):
		return invalid("ends_at", "must be after starts_at")
	}
	if a.PaymentTTL < MinPaymentTTL || a.PaymentTTL > MaxPaymentTTL {
		return invalid("payment_ttl_seconds", "must be between %d and %d", int(MinPaymentTTL.Seconds()), int(MaxPaymentTTL.Seconds()))
	}
	if a.PaymentTTL%time.Second != 0 {
		return invalid("payment_ttl_seconds", "must be whole seconds")
	}
	if a.Type == GroupBuy {
		if a.GroupSize < 2 || a.GroupSize > MaxGroupSize {
			return invalid("group_size", "is required for a group buy, between 2 and %d", MaxGroupSize)
		}
		if a.GroupTTL < MinGroupTTL || a.GroupTTL > MaxGroupTTL || a.GroupTTL%time.Second != 0 {
			return invalid("group_ttl_seconds", "is required for a group buy, whole seconds between %d and %d",
				int(MinGroupTTL.Seconds()), int(MaxGroupTTL.Seconds()))
		}
	} else if a.GroupSize != 0 || a.GroupTTL != 0 {
		return invalid("group_size", "group_size and group_ttl_seconds are for group buys only")
	}
	switch {
	case a.Shards < 0 || a.Shards > MaxShards:
		return invalid("shards", "must be between 1 and %d", MaxShards)
	case a.Shards > 1 && a.Type == GroupBuy:
		return invalid("shards", "a group buy keeps its groups in one shard: shards must be 1")
	case a.Shards > 1 && a.stock() < a.Shards:
		return invalid("shards", "must not exceed total_stock (%d): every shard starts with a unit", a.stock())
	case a.Shards > 1 && len(a.Items) > 1:
		return invalid("shards", "a sale of several items keeps its stock in one slot: shards must be 1 (docs/orders.md, \"Items\")")
	}
	if err := a.validateWaitingRoom(); err != nil {
		return err
	}
	switch a.Status {
	case Draft, Published, Closed:
	default:
		return invalid("status", "%q is not draft, published or closed", a.Status)
	}
	if a.Paused && a.Status != Published {
		return invalid("paused", "only a published sale is paused, not a %s one", a.Status)
	}
	return nil
}

// stock is a's units: its items' sum, or TotalStock in the flat form.
func (a *Activity) stock() int {
	if len(a.Items) > 0 {
		return itemsStock(a.Items)
	}
	return a.TotalStock
}

// Patch is a change an admin asks for; nil fields stay as they are.
type Patch struct {
	Name         *string
	SKU          *string
	PriceCents   *int64
	TotalStock   *int
	PerUserLimit *int
	StartsAt     *time.Time
	EndsAt       *time.Time
	PaymentTTL   *time.Duration
	GroupSize    *int
	GroupTTL     *time.Duration
	Shards       *int
	// Items replaces a draft's items (SKU, PriceCents and TotalStock
	// change a draft of one item; a draft of several changes its items
	// here).
	Items *[]Item
	// The waiting room's: WaitingRoom, AdmissionTTL and JoinPowBits change
	// a draft; AdmitPerSecond a published sale too.
	WaitingRoom    *bool
	AdmitPerSecond *int
	AdmissionTTL   *time.Duration
	JoinPowBits    *int
}

// SafeAfterPublish lists the fields a published activity may still change:
// its name, and its end, later only. Everything else decides who got what at
// which price; changing it mid-sale would treat buyers differently.
var SafeAfterPublish = []string{"name", "ends_at (later only)", "admit_per_second"}

// Apply changes a according to p, enforcing what a's status allows, and
// validates the result. It changes a only on success.
func (a *Activity) Apply(p Patch) error {
	next := *a
	next.Items = cloneItems(a.Items)
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.EndsAt != nil {
		next.EndsAt = *p.EndsAt
	}
	if p.AdmitPerSecond != nil {
		next.AdmitPerSecond = *p.AdmitPerSecond
	}
	switch a.Status {
	case Closed:
		return refusal.New(ErrConflict, "a closed activity cannot change")
	case Published:
		if p.SKU != nil || p.PriceCents != nil || p.TotalStock != nil || p.PerUserLimit != nil ||
			p.StartsAt != nil || p.PaymentTTL != nil || p.GroupSize != nil || p.GroupTTL != nil || p.Shards != nil || p.Items != nil ||
			p.WaitingRoom != nil || p.AdmissionTTL != nil || p.JoinPowBits != nil {
			return refusal.New(ErrConflict, "after publishing only %s may change (an item's stock: POST .../stock)", strings.Join(SafeAfterPublish, " and "))
		}
		if p.EndsAt != nil && p.EndsAt.Before(a.EndsAt) {
			return refusal.New(ErrConflict, "ends_at may only move later after publishing; close the activity to stop it")
		}
	default:
		if err := next.applyItems(p); err != nil {
			return err
		}
		if p.PerUserLimit != nil {
			next.PerUserLimit = *p.PerUserLimit
		}
		if p.StartsAt != nil {
			next.StartsAt = *p.StartsAt
		}
		if p.PaymentTTL != nil {
			next.PaymentTTL = *p.PaymentTTL
		}
		if p.GroupSize != nil {
			next.GroupSize = *p.GroupSize
		}
		if p.GroupTTL != nil {
			next.GroupTTL = *p.GroupTTL
		}
		if p.Shards != nil {
			next.Shards = *p.Shards
		}
		if p.WaitingRoom != nil {
			next.WaitingRoom = *p.WaitingRoom
		}
		if p.AdmissionTTL != nil {
			next.AdmissionTTL = *p.AdmissionTTL
		}
		if p.JoinPowBits != nil {
			next.JoinPowBits = *p.JoinPowBits
		}
	}
	if err := next.Validate(); err != nil {
		return err
	}
	next.Normalize()
	*a = next
	return nil
}

// applyItems applies p's items, or its flat fields, to a draft: the flat
// fields change an activity of one item (its item follows them), items
// replace them all.
func (a *Activity) applyItems(p Patch) error {
	flat := p.SKU != nil || p.PriceCents != nil || p.TotalStock != nil
	if p.Items != nil {
		if flat {
			return invalid("items", "give items, or sku, price_cents and total_stock: not both")
		}
		a.Items = cloneItems(*p.Items)
		a.SKU, a.PriceCents, a.TotalStock = "", 0, 0
		if len(a.Items) == 0 {
			return invalid("items", "must be 1 to %d items, not 0", MaxItems)
		}
		return nil
	}
	if !flat {
		return nil
	}
	if len(a.Items) > 1 {
		return invalid("items", "this activity has %d items: change them with items", len(a.Items))
	}
	if p.SKU != nil {
		a.SKU = *p.SKU
	}
	if p.PriceCents != nil {
		a.PriceCents = *p.PriceCents
	}
	if p.TotalStock != nil {
		a.TotalStock = *p.TotalStock
	}
	if len(a.Items) == 1 {
		a.Items[0].SKU, a.Items[0].PriceCents, a.Items[0].Stock = a.SKU, a.PriceCents, a.TotalStock
	}
	return nil
}

// ShardCount is a's shards, 1 when unset.
func (a *Activity) ShardCount() int {
	if a.Shards < 1 {
		return 1
	}
	return a.Shards
}

// ShardOf is the shard of a sale with shards shards that user's orders
// are in: a stable hash of the user id (splitmix64's finaliser, so
// consecutive ids spread), the same in every process and release. It must
// never change: a user's units, Idempotency-Keys and orders are found in
// their shard.
func ShardOf(userID int64, shards int) int {
	if shards <= 1 {
		return 0
	}
	z := uint64(userID) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(shards))
}

// LastChange is the latest time an order of a can still change (be paid,
// time out, be settled with its group): a group opened at EndsAt has its
// deadline GroupTTL later, and a member who joined just before that pays
// or times out a PaymentTTL after. A flash sale's is EndsAt + PaymentTTL.
func (a *Activity) LastChange() time.Time { return a.EndsAt.Add(a.GroupTTL + a.PaymentTTL) }

// RecordTTL is how long an order or group record of a is kept in Redis
// from its creation: an order can still change a group time and a payment
// time after it was placed (a member who joins just before the group's
// deadline pays or times out a payment time later, and the group is
// settled at its deadline), and it is kept retention beyond that. Tied to
// LastChange: the one place both limits meet, so no configuration lets a
// record expire before its group is settled.
func (a *Activity) RecordTTL(retention time.Duration) time.Duration {
	return a.GroupTTL + a.PaymentTTL + retention
}

// LiveUntil is when a's keys in Redis expire: retention after its last
// change. No order record outlives them (an order is placed by EndsAt and
// kept RecordTTL). After it the sale cannot change: loading it again would
// put back its whole stock with nobody's purchases counted.
func (a *Activity) LiveUntil(retention time.Duration) time.Time {
	return a.LastChange().Add(retention)
}

// SellingAt reports why the activity does not sell at t, or nil if it does.
// The authoritative check runs in Redis against Redis time; this one serves
// reads and early refusals.
func (a *Activity) SellingAt(t time.Time) error {
	switch {
	case a.Status != Published:
		return refusal.New(ErrConflict, "the activity is %s", a.Status)
	case a.Paused:
		return ErrPaused
	case t.Before(a.StartsAt):
		return ErrNotStarted
	case !t.Before(a.EndsAt):
		return ErrEnded
	}
	return nil
}

// Errors of a sale's window and stock, shared by the stock and order paths.
var (
	ErrNotStarted    = errors.New("activity: not started")
	ErrEnded         = errors.New("activity: ended") // past its end, or closed
	ErrSoldOut       = errors.New("activity: sold out")
	ErrLimitExceeded = errors.New("activity: per-user limit exceeded")
	ErrNotOnSale     = errors.New("activity: not on sale") // draft, or unknown to Redis
	// ErrPaused: the sale is paused (Activity.Paused); it may resume.
	ErrPaused = errors.New("activity: paused")
)
