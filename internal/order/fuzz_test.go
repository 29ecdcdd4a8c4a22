package order

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Order numbers and group ids come from clients in paths: ParseNo never
// panics, refuses with ErrInvalid, and what it accepts names a positive
// activity exactly as written (so every key of the order is in that
// activity's Redis slot).
func FuzzParseNo(f *testing.F) {
	for _, s := range []string{NewNo(42), NewNo(1), "42-0CF3YH0AB7J8Q2RS", "", "-", "0-0CF3YH0AB7J8Q2RS",
		"+1-0CF3YH0AB7J8Q2RS", "1-0CF3YH0AB7J8Q2Ru", "9223372036854775808-0CF3YH0AB7J8Q2RS", "1--0CF3YH0AB7J8Q2R",
		"1-IIIIIIIIIIIIIIII", "1-" + strings.Repeat("Z", 26)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, no string) {
		id, err := ParseNo(no)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || id != 0 {
				t.Fatalf("ParseNo(%q) = %d, %v", no, id, err)
			}
			return
		}
		act, rest, _ := strings.Cut(no, "-")
		if id <= 0 || strconv.FormatInt(id, 10) != act || (len(rest) != 26 && len(rest) != 16) || len(no) > 48 {
			t.Fatalf("ParseNo(%q) accepted activity %d", no, id)
		}
		if again, err := ParseNo(NewNo(id)); err != nil || again != id {
			t.Fatalf("a new number of activity %d reads back as %d, %v", id, again, err)
		}
	})
}
