package webhook_test

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/webhook"
)

// Svix's schedule: eight attempts, the first retry within seconds, the
// last more than a day after the first.
func TestDefaultSchedule_retriesForMoreThanADay(t *testing.T) {
	s := webhook.DefaultSchedule
	if s.Attempts() != 8 || s.Span() != 27*time.Hour+35*time.Minute+5*time.Second {
		t.Fatalf("%d attempts over %v", s.Attempts(), s.Span())
	}
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		w, ok := s.Wait(1)
		if !ok {
			t.Fatal("no retry after the first attempt")
		}
		lo, hi = min(lo, w), max(hi, w)
	}
	if lo < 4500*time.Millisecond || hi > 5500*time.Millisecond || hi-lo < 500*time.Millisecond {
		t.Fatalf("the first retry waits %v to %v: want 5 s ± 10%%, spread", lo, hi)
	}
	if _, ok := s.Wait(8); ok {
		t.Fatal("a retry after the eighth attempt")
	}
}
