package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/order"
)

// memberFault finds why the JSON value raw does not decode into dst (a
// pointer to a struct of plain fields): it is not an object, or one of its
// members — the first, in the body's order — names no field of dst or has
// a value its field's type cannot hold. The error names that member as
// Field, with a message a person reads: "starts_at: must be a time in RFC
// 3339 form, e.g. 2026-12-01T10:00:00Z", not Go's "parsing time …". nil
// when it finds no fault.
//
// It decodes member by member, so the member at fault is known from where
// it is, not read back out of encoding/json's error text (whose unknown-
// field error is a bare string, and whose time errors name no member).
// Only a refused body pays for it: an accepted one is decoded once, by
// decodeJSON.
func memberFault(raw []byte, dst any) *httperr.Error {
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	if e := objectFault(raw, t.Elem(), ""); e != nil {
		if e.Field == "" {
			e.Message = "request body must be a JSON object"
		}
		return e
	}
	return nil
}

// objectFault is memberFault of raw, a value of struct t at prefix (""
// for the body, "items[2]." for a member of an array's object): the
// members of an array of objects (an activity's items) are named by their
// place, "items[2].stock".
func objectFault(raw []byte, t reflect.Type, prefix string) *httperr.Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fieldError(strings.TrimSuffix(prefix, "."), "must be an object, not "+jsonKind(raw))
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		f, ok := fieldNamed(t, name)
		if !ok {
			return fieldError(prefix+name, "is not a field of this request")
		}
		if f.typ.Kind() == reflect.Slice && f.typ.Elem().Kind() == reflect.Struct && jsonKind(value) == "an array" {
			if e := arrayFault(value, f.typ.Elem(), prefix+f.name); e != nil {
				return e
			}
			continue
		}
		if err := json.Unmarshal(value, reflect.New(f.typ).Interface()); err != nil {
			return fieldError(prefix+f.name, mustBe(f, value))
		}
	}
	return nil
}

// arrayFault is objectFault of each object of the array raw, of name.
func arrayFault(raw []byte, elem reflect.Type, name string) *httperr.Error {
	var values []json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil
	}
	for i, v := range values {
		if e := objectFault(v, elem, fmt.Sprintf("%s[%d].", name, i)); e != nil {
			return e
		}
	}
	return nil
}

// fieldError is INVALID_ARGUMENT of field, its message "<field>: <what>"
// as activity.FieldError's (the admin console shows what follows the
// prefix beside the field).
func fieldError(field, what string) *httperr.Error {
	return &httperr.Error{Code: httperr.InvalidArgument, Message: field + ": " + what, Field: field}
}

// member is a struct field as JSON sees it.
type member struct {
	name string // its JSON name
	typ  reflect.Type
}

// fieldNamed finds the field of struct t that encoding/json decodes the
// member name into: its JSON name exactly, else in another case (as
// encoding/json matches).
func fieldNamed(t reflect.Type, name string) (member, bool) {
	var folded member
	found := false
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		switch {
		case tag == name:
			return member{tag, f.Type}, true
		case !found && strings.EqualFold(tag, name):
			folded, found = member{tag, f.Type}, true
		}
	}
	return folded, found
}

// mustBe says what a value of member f is, for a value that is not one.
func mustBe(f member, value json.RawMessage) string {
	t := f.typ
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "must be a time in RFC 3339 form, e.g. 2026-12-01T10:00:00Z"
	}
	sent := jsonKind(value)
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if sent != "a number" {
			return "must be a whole number, not " + sent
		}
		// A fraction, an exponent, or a number t cannot hold: the field's
		// own range (the type's where it has none).
		r, ok := wholeRanges[f.name]
		if !ok {
			r = span{int64(math.MinInt64) >> (64 - t.Bits()), int64(math.MaxInt64) >> (64 - t.Bits())}
		}
		if bytes.ContainsAny(value, ".eE") {
			return fmt.Sprintf("must be a whole number between %d and %d, written without a fraction or exponent", r.lo, r.hi)
		}
		return fmt.Sprintf("must be a whole number between %d and %d", r.lo, r.hi)
	case reflect.String:
		return "must be a string, not " + sent
	case reflect.Bool:
		return "must be true or false, not " + sent
	case reflect.Slice:
		return "must be an array, not " + sent
	}
	return "must be of another type than " + sent
}

// span is the range of a whole-number member: lo to hi.
type span struct{ lo, hi int64 }

// wholeRanges are the ranges of the whole-number members of the API's
// request bodies, by JSON name: the domains' own rules (order.MaxQuantity,
// activity.Validate's bounds, a positive id), stated by the message of a
// number its field cannot hold — a fraction, an exponent, a number past
// int64 — so that a client reads "quantity: must be a whole number between
// 1 and 1000", not the range of Go's int. A number the field holds is
// judged by its domain, whose refusal states the same range. Every
// whole-number member of a request body has its range here; both are
// tested (TestWholeRanges_*).
var wholeRanges = map[string]span{
	"quantity":            {1, order.MaxQuantity},
	"price_cents":         {1, activity.MaxPriceCents},
	"total_stock":         {1, activity.MaxStock},
	"per_user_limit":      {1, activity.MaxPerUserLimit},
	"payment_ttl_seconds": {seconds64(activity.MinPaymentTTL), seconds64(activity.MaxPaymentTTL)},
	"group_size":          {2, activity.MaxGroupSize},
	"group_ttl_seconds":   {seconds64(activity.MinGroupTTL), seconds64(activity.MaxGroupTTL)},
	"shards":              {1, activity.MaxShards},
	"stock":               {1, activity.MaxStock}, // an item's (items[i].stock)
	"add":                 {-activity.MaxStock, activity.MaxStock},
	"activity_id":         {1, math.MaxInt64},
	// The waiting room's (0 is also admit_per_second's and
	// admission_ttl_seconds' absent value: no room, the default ttl).
	"admit_per_second":      {1, activity.MaxAdmitPerSecond},
	"admission_ttl_seconds": {seconds64(activity.MinAdmissionTTL), seconds64(activity.MaxAdmissionTTL)},
	"join_pow_bits":         {0, activity.MaxJoinPowBits},
}

func seconds64(d time.Duration) int64 { return int64(d / time.Second) }

// jsonKind names the kind of a well-formed JSON value, by its first byte.
func jsonKind(value json.RawMessage) string {
	v := bytes.TrimSpace(value)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}
