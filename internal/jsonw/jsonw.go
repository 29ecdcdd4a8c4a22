// Package jsonw writes JSON values by hand on hot paths: the same bytes
// encoding/json writes for them, without its reflection; and holds the
// pieces that the hand-written readers of the plainest JSON share. An order's answer
// (internal/httpapi), an order event's body (internal/webhook) and the
// relay's batch tasks (internal/tasks) are written with it; each of those
// has a test comparing its output with encoding/json's byte for byte, and
// this package's own fuzz targets compare the pieces.
package jsonw

import (
	"encoding/json"
	"time"
)

// AppendString appends s quoted as encoding/json quotes it: as it is when
// every byte is printable ASCII that encoding/json leaves alone (an order
// number, a status, most SKUs), else through encoding/json itself (its
// escapes: quotes, backslashes, control characters, the HTML characters
// <>&, U+2028 and U+2029, invalid UTF-8).
func AppendString(b []byte, s string) []byte {
	if !Plain(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Plain reports whether encoding/json writes s between quotes as it is:
// every byte printable ASCII but the quote, the backslash and <>&.
func Plain(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// AppendTime appends t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, trailing zeros cut). A year outside 0–9999, which
// MarshalJSON refuses (and encoding/json would then fail the whole
// value), is written null: never a time of ours, which are clocks'.
func AppendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendUTCMillis appends t, which must be in UTC, as
// t.Format("2006-01-02T15:04:05.000Z07:00") writes it (unquoted), for a
// year in 0–9999; any other year through that Format itself. It is the
// order events' timestamp: written out digit by digit it costs a tenth of
// the layout's interpretation.
func AppendUTCMillis(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 || t.Location() != time.UTC {
		return t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, min, sec := t.Clock()
	ms := t.Nanosecond() / 1e6
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, 'Z')
}

// The pieces the hand-written readers share (an order's body in
// internal/httpapi, a batch task's payload in internal/tasks): each takes
// only JSON's plainest form and leaves anything else to encoding/json.

// At reports whether raw has s at i.
func At(raw []byte, i int, s string) bool {
	return len(raw)-i >= len(s) && string(raw[i:i+len(s)]) == s
}

// PlainString reads a JSON string at i with no escapes and only printable
// ASCII in it (what encoding/json reads as it is), and returns it and the
// index after it; ok is false for any other string.
func PlainString(raw []byte, i int) (s string, next int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return string(raw[i+1 : j]), j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", i, false
		}
	}
	return "", i, false
}
