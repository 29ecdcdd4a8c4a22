package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/jsonw/jsonwtest"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range jsonwtest.OddStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}

func TestAppendTime_asMarshalJSON(t *testing.T) {
	for _, tm := range []time.Time{
		{}, time.Unix(0, 0).UTC(), time.Date(2026, 11, 29, 17, 4, 5, 120000000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.Local), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 6, 1, 8, 0, 0, 0, time.FixedZone("CST", 8*3600)),
	} {
		want, err := tm.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendTime(nil, tm); !bytes.Equal(got, want) {
			t.Fatalf("%v: got %s want %s", tm, got, want)
		}
	}
	if got := AppendTime(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); string(got) != "null" {
		t.Fatalf("year 10000: got %s, want null", got)
	}
}

const millisLayout = "2006-01-02T15:04:05.000Z07:00"

// FuzzAppendUTCMillis: any instant, in UTC and in another zone, is written
// as the layout writes it.
func FuzzAppendUTCMillis(f *testing.F) {
	for _, ns := range []int64{0, 1, -1, 1_764_435_845_123_456_789, math.MaxInt64, math.MinInt64, 4_102_444_799_999_000_000} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		for _, tm := range []time.Time{time.Unix(0, ns).UTC(), time.Unix(0, ns).In(time.FixedZone("X", -3*3600))} {
			want := tm.Format(millisLayout)
			if got := AppendUTCMillis([]byte("x"), tm); string(got[1:]) != want || got[0] != 'x' {
				t.Fatalf("%d (%v): got %s want %s", ns, tm.Location(), got[1:], want)
			}
		}
	})
}

// Years at the edges: time.Unix's range does not reach them.
func TestAppendUTCMillis_years(t *testing.T) {
	for _, y := range []int{0, 1, 9, 99, 999, 1000, 2026, 9999, -1, 10000, 123456} {
		tm := time.Date(y, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
		if got, want := string(AppendUTCMillis(nil, tm)), tm.Format(millisLayout); got != want {
			t.Fatalf("year %d: got %s want %s", y, got, want)
		}
	}
}

func BenchmarkUTCMillis(b *testing.B) {
	tm := time.Date(2026, 11, 29, 17, 4, 5, 123456789, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("Format", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tm.Format(millisLayout)
		}
	})
	b.Run("AppendUTCMillis", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendUTCMillis(buf[:0], tm)
		}
	})
}
