package redisstore_test

import (
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/redisstore"
	"github.com/flashsale/flashsale/internal/refusal"
)

// Every sale code has its error, and only those codes. A bad quantity
// (code 6) is refused as PlaceRequest.Validate refuses it: same kind, same
// message.
func TestSaleRefusal_oneErrorPerCode(t *testing.T) {
	want := map[int64]error{1: activity.ErrNotOnSale, 2: activity.ErrNotStarted, 3: activity.ErrEnded,
		4: activity.ErrLimitExceeded, 5: activity.ErrSoldOut, 6: order.ErrInvalid}
	for code := int64(-1); code <= 40; code++ {
		err, ok := redisstore.SaleRefusal(code)
		if ok != (want[code] != nil) || !errors.Is(err, want[code]) {
			t.Errorf("code %d: %v, %v; want %v", code, err, ok, want[code])
		}
	}
	validate := order.PlaceRequest{ActivityID: 1, UserID: 1, Quantity: 0}.Validate()
	script, _ := redisstore.SaleRefusal(6)
	if validate == nil || script.Error() != validate.Error() || refusal.Message(script, "") != refusal.Message(validate, "") {
		t.Fatalf("a bad quantity: the script's %q, Validate's %q; want one refusal", script, validate)
	}
}

// Every code a script returns is in the one table (codes.go): the codes a
// script's source returns, as {code, …} or a sale_decide code, are the
// ones the table names.
func TestCodes_everyCodeAScriptReturns_isInTheTable(t *testing.T) {
	returned := regexp.MustCompile(`(?:return|out\[i\] =|out\[[a-z]+\] =) \{(\d+)[,}]`)
	decided := regexp.MustCompile(`\n\s+return (\d+)\n`)
	known := redisstore.Codes()
	seen := map[int64]bool{}
	for name, src := range redisstore.Scripts() {
		for _, re := range []*regexp.Regexp{returned, decided} {
			for _, m := range re.FindAllStringSubmatch(src, -1) {
				code, _ := strconv.ParseInt(m[1], 10, 64)
				seen[code] = true
				if _, ok := known[code]; !ok && name != "persisted" {
					t.Errorf("%s.lua returns code %d, which codes.go does not name", name, code)
				}
			}
		}
	}
	if len(seen) < 20 {
		t.Fatalf("found %d codes in the scripts: the patterns no longer match how they return codes", len(seen))
	}
}
