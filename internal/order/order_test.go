package order

import (
	cryptorand "crypto/rand"
	"math"
	"strconv"
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

// Numbers drawn by many goroutines at once are all different, all parse
// to their activity, and carry their time; the largest activity id fits.
func TestNewNo_manyAtOnce_allDistinct(t *testing.T) {
	const each, workers = 50000, 8
	got := make(chan []string, workers)
	before := uint64(time.Now().UnixMilli())
	for range workers {
		go func() {
			nos := make([]string, each)
			for i := range nos {
				nos[i] = NewNo(7)
			}
			got <- nos
		}()
	}
	seen := make(map[string]bool, each*workers)
	for range workers {
		for _, no := range <-got {
			if seen[no] {
				t.Fatalf("%s drawn twice", no)
			}
			seen[no] = true
			if id, err := ParseNo(no); err != nil || id != 7 || len(no) != 2+noChars {
				t.Fatalf("ParseNo(%q) = %d, %v", no, id, err)
			}
		}
	}
	if ms, ok := NoTime(NewNo(7)); !ok || ms < before {
		t.Fatalf("NoTime = %d %v, want at least %d", ms, ok, before)
	}
	if no := NewNo(math.MaxInt64); no[:20] != "9223372036854775807-" || len(no) != 20+noChars {
		t.Fatalf("NewNo(MaxInt64) = %q", no)
	}
}

// go test -run '^$' -bench NewNo -benchmem ./internal/order/
func BenchmarkNewNo(b *testing.B) {
	b.Run("math/rand/v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewNo(42)
		}
	})
	b.Run("crypto/rand (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x [16]byte
			ms := uint64(time.Now().UnixMilli())
			for i := 5; i >= 0; i-- {
				x[i] = byte(ms)
				ms >>= 8
			}
			_, _ = cryptorand.Read(x[6:])
			_ = strconv.FormatInt(42, 10) + "-" + noEncoding.EncodeToString(x[:])
		}
	})
}
