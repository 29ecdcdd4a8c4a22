package lock

import "time"

// Option changes how one lock is obtained and held.
type Option func(*options)

type options struct {
	label     string
	family    string
	noRenewal bool
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
