package webhook

import (
	"math/rand/v2"
	"time"
)

// Schedule is the waits between a delivery's attempts: the first attempt
// goes at once, the n'th retry Schedule[n-1] after the attempt before it.
type Schedule []time.Duration

// DefaultSchedule is Svix's (WEBHOOK_RETRY_SCHEDULE): 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h, 10 h — eight attempts over 27 h 35 min, the first
// retries within seconds (a receiver's blip) and the last more than a day
// later (an outage over a night).
var DefaultSchedule = Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Attempts is how many attempts a delivery gets.
func (s Schedule) Attempts() int { return len(s) + 1 }

// Span is the time from the first attempt to the last.
func (s Schedule) Span() time.Duration {
	var d time.Duration
	for _, w := range s {
		d += w
	}
	return d
}

// jitter is how far a wait may move either way: ±10%, so that a receiver
// back from an outage gets its backlog spread out, not in one second.
const jitter = 0.10

// Wait is how long to wait after attempt n (1 the first) failed, jittered;
// ok is false when attempt n was the last.
func (s Schedule) Wait(n int) (time.Duration, bool) {
	if n < 1 || n > len(s) {
		return 0, false
	}
	return jittered(s[n-1], jitter), true
}

// jittered is d moved by up to ±share of itself at random.
func jittered(d time.Duration, share float64) time.Duration {
	return time.Duration(float64(d) * (1 + share*(2*rand.Float64()-1)))
}
