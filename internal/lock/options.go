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
	table     string
	maxWait   time.Duration // not part of a hold: zeroed in holdSpec
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

// InTable keeps the mutex as a field of the hash named table, beside the
// other locks of that table, instead of as a key of its own (mutex only;
// the other kinds ignore it). For many short locks that come and go
// together — the per-(sale, user) order locks of one sale: the obtains of a
// pipeline then cost Redis one HMGET and one HSET between them, and their
// releases one HMGET and one HDEL, where keys of their own cost a SET with
// an expiry, a GET and two DELs each (docs/locking.md, "Tables"). The lock
// is still a lock — owner token, ttl, watchdog, Lost, owner-checked release,
// fences (one counter per table) — and its key names it within the table:
// Obtain(ctx, "7", ttl, InTable("order-user:42")); a key in a table may not
// contain '|' (its waiting marker is the field "w|<key>"). HolderIn
// inspects it.
func InTable(table string) Option {
	return func(o *options) { o.table = table }
}

// WithMaxWait caps how long Obtain waits for the lock, as a ctx deadline d
// after the call would — but only the wait: a caller's step run with the
// lock (ReleaseIn) still has all of ctx. A wait cut short by it is ErrCanceled matching
// context.DeadlineExceeded. Zero: as long as ctx allows.
func WithMaxWait(d time.Duration) Option {
	return func(o *options) { o.maxWait = d }
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
	if o.maxWait < 0 {
		return o, invalidf("max wait %v is negative", o.maxWait)
	}
	if len(o.label) > maxKeyLen {
		return o, invalidf("label longer than %d bytes", maxKeyLen)
	}
	if len(o.family) > 64 {
		return o, invalidf("family longer than 64 bytes")
	}
	if o.table != "" {
		if err := validateKey(o.table); err != nil {
			return o, invalidf("table: %v", err)
		}
	}
	return o, nil
}

// buildOptionsLoose is buildOptions for the metrics of a call whose options
// may be invalid (the call then fails on its own).
func buildOptionsLoose(opts []Option) options {
	o, _ := buildOptions(opts)
	return o
}
