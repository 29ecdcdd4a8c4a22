package order

import (
	"testing"
	"time"
)

func TestNo_roundTripsAndRejectsGarbage(t *testing.T) {
	no := NewNo(42)
	if id, err := ParseNo(no); err != nil || id != 42 {
		t.Fatalf("ParseNo(%q) = %d, %v", no, id, err)
	}
	if NewNo(42) == no {
		t.Fatal("two order numbers alike")
	}
	for _, bad := range []string{"", "42", "42-", "x-0CF3YH0AB7J8Q2RS", "0-0CF3YH0AB7J8Q2RS", "-1-0CF3YH0AB7J8Q2RS",
		"042-0CF3YH0AB7J8Q2RS", "42-0CF3YH0AB7J8Q2R", "42-0CF3YH0AB7J8Q2Ru", "42-0CF3YH0AB7J8Q2R!"} {
		if _, err := ParseNo(bad); err == nil {
			t.Errorf("ParseNo(%q) accepted", bad)
		}
	}
}

// NoTime reads back the milliseconds NewNo drew a number at, sharded or
// not, and none from a legacy or malformed number.
func TestNoTime_readsTheNumbersMilliseconds(t *testing.T) {
	before := uint64(time.Now().UnixMilli())
	no := NewNo(42)
	after := uint64(time.Now().UnixMilli())
	for _, n := range []string{no, InShard(no, 2, 5)} {
		ms, ok := NoTime(n)
		if !ok || ms < before || ms > after {
			t.Fatalf("NoTime(%s) = %d %v, want within [%d, %d]", n, ms, ok, before, after)
		}
	}
	for _, n := range []string{"42-0CF3YH0AB7J8Q2RS", "42-", "nonsense", "42-0CF3YH0AB7J8Q2RS5DW1K9X3Tu"} {
		if ms, ok := NoTime(n); ok {
			t.Fatalf("NoTime(%q) = %d", n, ms)
		}
	}
}
