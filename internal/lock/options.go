package lock

import "time"

// Option changes how one lock is obtained and held.
type Option func(*options)

type options struct {
	label     string
	family    string
	noRenewal bool
	noFence   bool
	maxHold   time.Duration
}

// WithLabel records a caller-chosen label (a request id, a job name) with the
// holder metadata, for diagnosis.
func WithLabel(label string) Option {
	return func(o *options) { o.label = label }
}

// WithFamily names the group of locks this one belongs to ("order-user",
// "activity") for the metrics. Use a few fixed names, never a key.
func WithFamily(name string) Option {
	return func(o *options) { o.family = name }
}

// WithoutRenewal turns the watchdog off: the lock expires ttl after it was
// obtained, and Lost is closed at that moment.
func WithoutRenewal() Option {
	return func(o *options) { o.noRenewal = true }
}

// WithoutFence obtains the mutex without minting a fencing token: Fence()
// is 0 and no fence counter is created or kept in Redis. For a lock that
// only serialises callers whose writes are safe on their own (the per-user
// order lock: the accept script is atomic), where a counter per key kept for
// FenceRetention would cost Redis memory for every user of every sale. The
// other kinds ignore it and mint as usual.
func WithoutFence() Option {
	return func(o *options) { o.noFence = true }
}

// WithMaxHold caps the total time the watchdog keeps the lock: renewals never
// extend it past d after it was obtained, and Lost is closed when it lapses.
// Zero means no cap.
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

func buildOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.maxHold < 0 {
		return o, invalidf("max hold %v is negative", o.maxHold)
	}
	if len(o.label) > maxKeyLen {
		return o, invalidf("label longer than %d bytes", maxKeyLen)
	}
	if len(o.family) > 64 {
		return o, invalidf("family longer than 64 bytes")
	}
	return o, nil
}

// buildOptionsLoose is buildOptions for the metrics of a call whose options
// may be invalid (the call then fails on its own).
func buildOptionsLoose(opts []Option) options {
	o, _ := buildOptions(opts)
	return o
}
