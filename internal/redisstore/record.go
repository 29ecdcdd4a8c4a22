package redisstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/order"
)

// An order's record in Redis is one field of its sale's orders hash
// (rediskeys.Activity.Orders): its fields in recordFields' order, '|'
// between them, empty for a default, empty ones at the end left off —
// scripts/lib_record.lua writes and reads the same form (and
// TestRecord_goAndLuaAgree holds the two together).
var recordFields = []string{"user", "qty", "price", "status", "created_ms", "pay_by_ms", "group", "fence",
	"persisted", "paid_ms", "cancelled_ms", "refunded_ms", "payment", "item", "reason", "soldout"}

// RecordValues splits a record into its fields by name (for tests and
// repairs by hand; FormatRecord joins them again).
func RecordValues(s string) map[string]string { return recordValues(s) }

// FormatRecord joins fields by name into a record.
func FormatRecord(m map[string]string) string { return formatRecord(m) }

// recordValues splits a record into its fields by name.
func recordValues(s string) map[string]string {
	parts := strings.Split(s, "|")
	m := make(map[string]string, len(recordFields))
	for i, name := range recordFields {
		if i < len(parts) {
			m[name] = parts[i]
		}
	}
	return m
}

// formatRecord joins fields by name into a record (what lib_record's
// record_encode writes).
func formatRecord(m map[string]string) string {
	parts := make([]string, len(recordFields))
	last := 0
	for i, name := range recordFields {
		parts[i] = m[name]
		if parts[i] != "" {
			last = i + 1
		}
	}
	return strings.Join(parts[:last], "|")
}

// The positions of recordFields, for parseRecord (TestRecord_fieldPositions
// holds them to the list).
const (
	fUser = iota
	fQty
	fPrice
	fStatus
	fCreated
	fPayBy
	fGroup
	fFence
	fPersisted
	fPaid
	fCancelled
	fRefunded
	fPayment
	fItem
	fReason
	fSoldOut
	nRecordFields
)

// parseRecord reads order no of activity act out of its record: its fields
// cut out by position, without the map recordValues builds (the worker
// parses every order it persists, the api every order it reads;
// BenchmarkParseRecord), its strings shared with the record's.
func parseRecord(no string, act int64, s string) order.Order {
	var f [nRecordFields]string
	for i := range f {
		f[i], s, _ = strings.Cut(s, "|")
	}
	num := func(i int) int64 {
		if f[i] == "" {
			return 0 // not parsed: ParseInt's error for "" is an allocation, once a record (soldout is mostly empty)
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	at := func(i int) time.Time {
		if f[i] == "" {
			return time.Time{}
		}
		return time.UnixMilli(num(i)).UTC()
	}
	cancelled := at(fCancelled)
	if cancelled.IsZero() {
		cancelled = at(fRefunded) // a refund ends an order too
	}
	qty, price := num(fQty), num(fPrice)
	return order.Order{
		No: no, ActivityID: act, UserID: num(fUser), Quantity: int(qty), PriceCents: price,
		AmountCents: price * qty, Status: order.Status(f[fStatus]), Fence: num(fFence),
		CreatedAt: at(fCreated), PayBy: at(fPayBy), PaidAt: at(fPaid), CancelledAt: cancelled,
		Persisted: f[fPersisted] == "1", GroupID: f[fGroup], PaymentID: f[fPayment], Item: f[fItem],
		CancelReason: order.CancelReason(f[fReason]), RefundedAt: at(fRefunded), SoldOutVersion: num(fSoldOut),
	}
}

// RecordStatus is the status a record holds (for the invariant checker and
// the soak, which read records directly).
func RecordStatus(s string) order.Status { return order.Status(recordValues(s)["status"]) }

// ParseRecord reads order no's record s (for the invariant checker).
func ParseRecord(no, s string) (order.Order, error) {
	act, err := order.ParseNo(no)
	if err != nil {
		return order.Order{}, err
	}
	return parseRecord(no, act, s), nil
}
