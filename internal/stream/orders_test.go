package stream_test

import (
	"errors"
	"testing"

	"github.com/flashsale/flashsale/internal/stream"
)

// A Last-Event-ID is a cursor this stream sent ("2.1"), an order's
// sequence alone ("2"), or nothing; anything else is ErrBadCursor, never a
// guess.
func TestParseCursor_acceptsTheStreamsIDs_refusesTheRest(t *testing.T) {
	good := map[string]stream.Cursor{"": {}, "0.0": {}, "1": {Order: 1}, "2.1": {Order: 2, Group: 1}, "3.0": {Order: 3}}
	for in, want := range good {
		got, err := stream.ParseCursor(in)
		if err != nil || got != want {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if in != "" && in != "1" && got.String() != in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), in)
		}
	}
	for _, in := range []string{"x", "1.", ".1", "1.x", "-1", "+1", "01", "1.2.3", " 1", "1000001", "99999999999999999999", "1e3"} {
		if _, err := stream.ParseCursor(in); !errors.Is(err, stream.ErrBadCursor) {
			t.Errorf("ParseCursor(%q): %v, want ErrBadCursor", in, err)
		}
	}
}
