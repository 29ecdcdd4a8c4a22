package httpapi

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

// A path id is a positive decimal integer written plainly: no sign, no
// leading zero, no spaces, no base prefix, no digit separator, not past
// int64. Anything else is 400 INVALID_ARGUMENT naming the parameter, in
// its message and as its Field, with the range of an id; a plain number
// past int64 is said to be too large, which is what is wrong with it.
func TestPathID_onlyPlainPositiveDecimals(t *testing.T) {
	ok := map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807}
	bad := []string{"", "0", "-1", "+5", "007", "0x1F", "0b1", "0o7", " 5", "5 ", "1_000", "1e3", "5.0",
		"-9223372036854775809", "099999999999999999999", "abc", "٣"}
	tooLarge := []string{"9223372036854775808", "99999999999999999999", "99999999999999999999999"}
	try := func(s string) (int64, error) {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Params = gin.Params{{Key: "id", Value: s}}
		return pathID(c, "id")
	}
	for s, want := range ok {
		if got, err := try(s); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range append(bad, tooLarge...) {
		got, err := try(s)
		if err == nil {
			t.Errorf("%q: %d, want an error", s, got)
			continue
		}
		want := fmt.Sprintf("id %q: want an integer from 1 to 9223372036854775807", s)
		if slices.Contains(tooLarge, s) {
			want = fmt.Sprintf("id %q is too large: want an integer from 1 to 9223372036854775807", s)
		}
		if !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
		var he *httperr.Error
		if !errors.As(err, &he) || he.Field != "id" || he.Code != httperr.InvalidArgument {
			t.Errorf("%q: %#v, want INVALID_ARGUMENT with Field id", s, err)
		}
	}
}

// What reading a path id costs the api (every order, payment and admin
// route reads one):
//
//	go test -run '^$' -bench PathID -benchmem ./internal/httpapi/
func BenchmarkPathID(b *testing.B) {
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Params = gin.Params{{Key: "id", Value: "1732460"}}
	b.ReportAllocs()
	for range b.N {
		if _, err := pathID(c, "id"); err != nil {
			b.Fatal(err)
		}
	}
}
