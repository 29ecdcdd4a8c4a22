package order

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Order numbers and group ids come from clients in paths: ParseNoShard
// never panics, refuses with ErrInvalid, and what it accepts names a
// positive activity, and a shard below its sale's shards (at most 64),
// exactly as written (so every key of the order is in that shard's Redis
// slot).
func FuzzParseNo(f *testing.F) {
	for _, s := range []string{NewNo(42), NewNo(1), "42-0CF3YH0AB7J8Q2RS", "", "-", "0-0CF3YH0AB7J8Q2RS",
		"+1-0CF3YH0AB7J8Q2RS", "1-0CF3YH0AB7J8Q2Ru", "9223372036854775808-0CF3YH0AB7J8Q2RS", "1--0CF3YH0AB7J8Q2R",
		"1-IIIIIIIIIIIIIIII", "1-" + strings.Repeat("Z", 26), InShard(NewNo(42), 2, 3), InShard(NewNo(7), 63, 64),
		"42.3.3-0CF3YH0AB7J8Q2RS", "42.0.3-0CF3YH0AB7J8Q2RS", "42.1.65-0CF3YH0AB7J8Q2RS", "42.1-0CF3YH0AB7J8Q2RS",
		"42.01.3-0CF3YH0AB7J8Q2RS", "42..3-0CF3YH0AB7J8Q2RS"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, no string) {
		id, shard, shards, err := ParseNoShard(no)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || id != 0 {
				t.Fatalf("ParseNoShard(%q) = %d, %v", no, id, err)
			}
			return
		}
		head, rest, _ := strings.Cut(no, "-")
		want := strconv.FormatInt(id, 10)
		if shard > 0 {
			want += "." + strconv.Itoa(shard) + "." + strconv.Itoa(shards)
		}
		if id <= 0 || head != want || (len(rest) != 26 && len(rest) != 16) || len(no) > 48 ||
			shard < 0 || shards < 1 || shards > 64 || (shard > 0 && shard >= shards) {
			t.Fatalf("ParseNoShard(%q) accepted activity %d shard %d of %d", no, id, shard, shards)
		}
		if _, err := noEncoding.DecodeString(rest); err != nil || strings.ContainsAny(rest, "\r\n") {
			t.Fatalf("ParseNoShard(%q) accepted a random part that is not base32 (%v)", no, err)
		}
		if again, err := ParseNo(no); err != nil || again != id {
			t.Fatalf("ParseNo(%q) = %d, %v", no, again, err)
		}
		if a, s, n, err := ParseNoShard(InShard(NewNo(id), shard, shards)); err != nil || a != id || s != shard || (shard > 0 && n != shards) {
			t.Fatalf("a new number of activity %d shard %d of %d reads back as %d %d %d, %v", id, shard, shards, a, s, n, err)
		}
	})
}

// The worker parses every order number of its batches: a valid one costs no
// allocation (the refusal was built, with its message, before every parse).
func TestParseNoShard_validNumber_allocatesNothing(t *testing.T) {
	nos := []string{NewNo(42), InShard(NewNo(7), 3, 8)}
	for _, no := range nos {
		if n := testing.AllocsPerRun(100, func() { _, _, _, _ = ParseNoShard(no) }); n != 0 {
			t.Errorf("ParseNoShard(%q): %.0f allocations, want 0", no, n)
		}
	}
	if _, _, _, err := ParseNoShard("42-0CF3YH0AB7J8Q2R\n"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a number with a newline: %v", err)
	}
}
