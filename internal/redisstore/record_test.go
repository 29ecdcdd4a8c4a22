package redisstore

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/testenv"
)

// lib_record.lua and record.go read and write the same form: what one
// writes the other reads back field for field, defaults left empty and
// trailing empties left off.
func TestRecord_goAndLuaAgree(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	lib, err := Lua.Source("lib_record")
	if err != nil {
		t.Fatal(err)
	}
	// Lua decodes ARGV[1] and encodes it again, and encodes the table of
	// ARGV[2..] (name, value, …) from scratch.
	roundTrip := redis.NewScript(lib + `
local r = {}
for i = 2, #ARGV, 2 do r[ARGV[i]] = ARGV[i + 1] end
return {record_encode(record_decode(ARGV[1])), record_encode(r)}
`)
	for _, m := range []map[string]string{
		{"user": "7", "qty": "1", "price": "1999", "status": "pending_payment", "created_ms": "1764000000000", "pay_by_ms": "1764000060000"},
		{"user": "7", "qty": "2", "price": "999", "status": "refunded", "created_ms": "1764000000000", "pay_by_ms": "1764000060000",
			"group": "1-GGGGGGGGGGGGGGGG", "fence": "1764000000123456", "persisted": "1", "paid_ms": "1764000001000", "refunded_ms": "1764000099000"},
		{"user": "8", "qty": "1", "price": "5", "status": "cancelled", "created_ms": "1", "pay_by_ms": "2", "cancelled_ms": "3"},
		{"user": "8", "qty": "1", "price": "5", "status": "cancelled", "created_ms": "1", "pay_by_ms": "2", "cancelled_ms": "3",
			"item": "PH-1", "reason": "timeout", "soldout": "4"},
	} {
		s := formatRecord(m)
		var args []any
		args = append(args, s)
		for name, v := range m {
			args = append(args, name, v)
		}
		got, err := roundTrip.Run(ctx, rdb, nil, args...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != s || got[1] != s {
			t.Fatalf("Go wrote %q; Lua read and wrote it back as %q, and wrote the same fields as %q", s, got[0], got[1])
		}
		if back := recordValues(s); !reflect.DeepEqual(nonEmpty(back), m) {
			t.Fatalf("Go read back %v, want %v", back, m)
		}
	}
}

func nonEmpty(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

func TestParseRecord(t *testing.T) {
	o := parseRecord("1-BBBB", 1, "7|2|999|refunded|1764000000000|1764000060000|1-GGGG|12|1|1764000001000||1764000099000")
	want := order.Order{
		No: "1-BBBB", ActivityID: 1, UserID: 7, Quantity: 2, PriceCents: 999, AmountCents: 1998, Status: order.Refunded,
		Fence: 12, Persisted: true, GroupID: "1-GGGG",
		CreatedAt: time.UnixMilli(1764000000000).UTC(), PayBy: time.UnixMilli(1764000060000).UTC(),
		PaidAt: time.UnixMilli(1764000001000).UTC(), CancelledAt: time.UnixMilli(1764000099000).UTC(),
		RefundedAt: time.UnixMilli(1764000099000).UTC(),
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("parsed %+v\nwant   %+v", o, want)
	}
	// A cancel's reason and a sell-out's version (issue 41's fields).
	c := parseRecord("1-CCCC", 1, "8|1|5|cancelled|1|2||5|||3|||PH-1|timeout|4")
	if c.CancelReason != order.CancelTimeout || c.SoldOutVersion != 4 || c.Item != "PH-1" || !c.RefundedAt.IsZero() {
		t.Fatalf("parsed %+v: want reason timeout, sold-out version 4, item PH-1, no refund", c)
	}
}

// A new order's record, its empty fields included (no sell-out version,
// no payment), parses without an allocation: the worker reads one for
// every order it persists (ParseInt's error for "" was one).
func TestParseRecord_newOrder_allocatesNothing(t *testing.T) {
	rec := "7|1|999|pending_payment|1764000000000|1764000060000||1|0|||||PH-1||"
	if n := testing.AllocsPerRun(100, func() { _ = parseRecord("1-BBBB", 1, rec) }); n != 0 {
		t.Fatalf("%v allocations a record", n)
	}
}

// parseRecord's positions are recordFields' order.
func TestRecord_fieldPositions(t *testing.T) {
	want := map[string]int{"user": fUser, "qty": fQty, "price": fPrice, "status": fStatus, "created_ms": fCreated,
		"pay_by_ms": fPayBy, "group": fGroup, "fence": fFence, "persisted": fPersisted, "paid_ms": fPaid,
		"cancelled_ms": fCancelled, "refunded_ms": fRefunded, "payment": fPayment, "item": fItem, "reason": fReason,
		"soldout": fSoldOut}
	if len(recordFields) != nRecordFields || len(want) != nRecordFields {
		t.Fatalf("%d record fields, %d positions, %d named here", len(recordFields), nRecordFields, len(want))
	}
	for i, name := range recordFields {
		if want[name] != i {
			t.Errorf("field %q is at %d; its position constant says %d", name, i, want[name])
		}
	}
}

// parseRecordByMap is parseRecord as it was before 2026-11-29, through
// recordValues' map: the reference parseRecord must agree with, and what
// BenchmarkParseRecord compares it against.
func parseRecordByMap(no string, act int64, s string) order.Order {
	m := recordValues(s)
	num := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	at := func(f string) time.Time {
		if m[f] == "" {
			return time.Time{}
		}
		return time.UnixMilli(num(f)).UTC()
	}
	cancelled := at("cancelled_ms")
	if cancelled.IsZero() {
		cancelled = at("refunded_ms")
	}
	qty := num("qty")
	return order.Order{
		No: no, ActivityID: act, UserID: num("user"), Quantity: int(qty), PriceCents: num("price"),
		AmountCents: num("price") * qty, Status: order.Status(m["status"]), Fence: num("fence"),
		CreatedAt: at("created_ms"), PayBy: at("pay_by_ms"), PaidAt: at("paid_ms"), CancelledAt: cancelled,
		Persisted: m["persisted"] == "1", GroupID: m["group"], PaymentID: m["payment"], Item: m["item"],
		CancelReason: order.CancelReason(m["reason"]), RefundedAt: at("refunded_ms"), SoldOutVersion: num("soldout"),
	}
}

// records are records of every shape: few fields, all, empty ones between,
// and more fields than this version knows (a newer writer's: ignored).
var records = []string{
	"7|1|1999|pending_payment|1764000000000|1764000060000",
	"7|2|999|refunded|1764000000000|1764000060000|1-GGGGGGGGGGGGGGGG|1764000000123456|1|1764000001000||1764000099000|pi_1",
	"8|1|5|cancelled|1|2||||||3||PH-1|timeout|4",
	"8|1|5|cancelled|1|2|||||3|||PH-1|shopper|4|extra|fields",
	"",
	"|||",
	"x|y|z",
}

func TestRecord_parseAgreesWithTheMap(t *testing.T) {
	for _, s := range records {
		if got, want := parseRecord("43-X", 43, s), parseRecordByMap("43-X", 43, s); !reflect.DeepEqual(got, want) {
			t.Errorf("record %q:\n got %+v\nwant %+v", s, got, want)
		}
	}
}

// BenchmarkParseRecord: a paid order's record read by position against
// through recordValues' map (go test -run '^$' -bench ParseRecord
// ./internal/redisstore/).
func BenchmarkParseRecord(b *testing.B) {
	rec := records[1]
	for name, parse := range map[string]func(string, int64, string) order.Order{
		"by position": parseRecord, "by map (before)": parseRecordByMap,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = parse("43-X", 43, rec)
			}
		})
	}
}
