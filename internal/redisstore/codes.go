package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Every code the order scripts return, in one table: what each means and
// the order domain's error for it, turned into errors here and nowhere
// else. The codes are one space across the scripts (place.lua, its
// lib_accept.lua and lib_sale.lua, open_group.lua, join_group.lua,
// transition.lua), so a code reads the same wherever it comes from.
const (
	codeAccepted = 0 // accepted, joined, opened, changed

	// lib_sale.lua's sale_decide: the sale's rules.
	codeNotOnSale    = 1 // unknown or a draft
	codeNotStarted   = 2
	codeEnded        = 3 // ended or closed
	codeOverLimit    = 4 // the user's units would pass the per-user limit
	codeSoldOut      = 5 // not enough units left
	codeBadQuantity  = 6 // not a whole number from 1 (PlaceRequest.Validate refuses first)
	codeReplay       = 7 // the Idempotency-Key made an order before: its number is returned
	codeWrongType    = 8 // a flash-sale order on a group buy, a group on a flash sale
	codeNoGroup      = 9
	codeGroupClosed  = 10
	codeAlreadyIn    = 11
	codeGroupFull    = 12
	codeNumberTaken  = 13 // another record stands at the number drawn: draw another
	codePaused       = 14 // the sale is paused
	codeNoItem       = 15 // a sale of several items, and the order named none
	codeUnknownItem  = 16 // the sale has no item of the SKU named
	codeOverItem     = 17 // the user's units of the item would pass its own limit
	codeLockBusy     = 20 // place.lua, elided: someone holds the user's lock; nothing ran
	codeRateLimited  = 21 // place.lua: over the user's rate limit; nothing else ran
	codeLockLost     = 22 // place.lua, held: the lock is no longer the request's; nothing ran
	codeOrderMissing = 31 // transition.lua: no such order (or not this user's)
	codeWrongState   = 32 // not in a state for the change (how a refund happens once)
	codePayTooLate   = 33 // the payment time is over
	codeNotDue       = 34 // an expiry before the payment time is over
	codeStale        = 35 // the fence is not above the order's: retry
	codeNotFailed    = 36 // settle or refund of a group that has not failed
	codeClosedGroup  = 37 // pay into a group that failed or is past its deadline
	codeBadAction    = 38 // an action transition.lua does not know
)

// codeNames names every code of the table (Codes).
var codeNames = map[int64]string{
	codeAccepted: "accepted", codeNotOnSale: "not on sale", codeNotStarted: "not started", codeEnded: "ended",
	codeOverLimit: "over the limit", codeSoldOut: "sold out", codeBadQuantity: "bad quantity", codeReplay: "replay",
	codeWrongType: "wrong type", codeNoGroup: "no group", codeGroupClosed: "group closed", codeAlreadyIn: "already in",
	codeGroupFull: "group full", codeNumberTaken: "number taken", codePaused: "paused", codeNoItem: "no item named",
	codeUnknownItem: "unknown item", codeOverItem: "over the item's limit", codeLockBusy: "lock busy",
	codeRateLimited: "rate limited", codeLockLost: "lock lost", codeOrderMissing: "order missing",
	codeWrongState: "wrong state", codePayTooLate: "pay too late", codeNotDue: "not due", codeStale: "stale",
	codeNotFailed: "group not failed", codeClosedGroup: "group closed (pay)", codeBadAction: "bad action",
}

// Codes is the table: every code an order script returns, by name (its
// test holds the scripts to it).
func Codes() map[int64]string { return codeNames }

// refusals are the errors of the codes that refuse something, whoever
// returns them; status is the order's status where a script returns one
// (transition.lua).
var refusals = map[int64]func(script, status string) error{
	codeNotOnSale:   constant(activity.ErrNotOnSale),
	codeNotStarted:  constant(activity.ErrNotStarted),
	codeEnded:       constant(activity.ErrEnded),
	codeOverLimit:   constant(activity.ErrLimitExceeded),
	codeSoldOut:     constant(activity.ErrSoldOut),
	codeBadQuantity: constant(order.ErrBadQuantity),
	codeWrongType: func(script, _ string) error {
		if script == "place" {
			return refusal.New(order.ErrWrongType, "a group buy's orders are placed by opening or joining a group")
		}
		return refusal.New(order.ErrWrongType, "groups are for group buys")
	},
	codeNoGroup:      constant(order.ErrGroupNotFound),
	codeGroupClosed:  constant(order.ErrGroupClosed),
	codeAlreadyIn:    constant(order.ErrAlreadyMember),
	codeGroupFull:    constant(order.ErrGroupFull),
	codeNumberTaken:  constant(order.ErrNumberTaken),
	codePaused:       constant(activity.ErrPaused),
	codeNoItem:       constant(order.ErrItemRequired),
	codeUnknownItem:  constant(refusal.OfField(order.ErrInvalid, "item", "the sale has no such item")),
	codeOverItem:     constant(refusal.New(activity.ErrLimitExceeded, "over the item's own per-user limit")),
	codeOrderMissing: constant(order.ErrNotFound),
	codeWrongState: func(_, status string) error {
		return refusal.New(order.ErrConflict, "the order is %s", status)
	},
	codePayTooLate:  constant(refusal.New(order.ErrConflict, "the payment time is over")),
	codeNotDue:      constant(refusal.New(order.ErrNotDue, "the payment time is not over yet")),
	codeStale:       constant(refusal.New(order.ErrStale, "a newer change was applied; try again")),
	codeNotFailed:   constant(refusal.New(order.ErrConflict, "the group has not failed")),
	codeClosedGroup: constant(refusal.New(order.ErrGroupClosed, "the group failed or its deadline passed")),
}

func constant(err error) func(string, string) error { return func(string, string) error { return err } }

// codeError is the error of code returned by script ("place", "open_group",
// "join_group"). A code no table entry has (codeBadAction, a code the
// caller handles itself) is a bug, reported as such.
func codeError(script string, code int64) error { return codeErrorWithStatus(script, code, "") }

// codeErrorWithStatus is codeError for a script that returns the order's
// status with its code (transition.lua).
func codeErrorWithStatus(script string, code int64, status string) error {
	if f, ok := refusals[code]; ok {
		return f(script, status)
	}
	return fmt.Errorf("redisstore: %s.lua returned code %d", script, code)
}

// itemError is err, the refusal of code for an order that named item sku
// ("" for none) with left units of it left, said of the item: which one
// is sold out, unknown, or over its limit. An order that named no item is
// refused as before items (a sale of one item's answers do not change).
func itemError(err error, code int64, sku string, left int64) error {
	if sku == "" {
		return err
	}
	switch code {
	case codeSoldOut:
		if left <= 0 {
			return refusal.OfField(activity.ErrSoldOut, "item", "item %q is sold out", sku)
		}
		return refusal.OfField(activity.ErrSoldOut, "item", "item %q has %d units left", sku, left)
	case codeUnknownItem:
		return refusal.OfField(order.ErrInvalid, "item", "the sale has no item %q", sku)
	case codeOverItem:
		return refusal.OfField(activity.ErrLimitExceeded, "item", "over the per-user limit of item %q", sku)
	}
	return err
}

// SaleRefusal is the error of one of lib_sale.lua's codes (1-6), and false
// for another code: for the seed recipe's benchmark (bench/strategy),
// which refuses a sale's orders as the scripts do.
func SaleRefusal(code int64) (error, bool) {
	if code < codeNotOnSale || code > codeBadQuantity {
		return nil, false
	}
	return codeError("place", code), true
}

// parseRetryAfter reads lib_rate.lua's refusal, seconds as a string; a
// second if it cannot be read.
func parseRetryAfter(secs string) time.Duration {
	if s, err := strconv.ParseFloat(secs, 64); err == nil {
		return time.Duration(s * float64(time.Second))
	}
	return time.Second
}
