package lock

import (
	"strings"
	"time"

	"github.com/flashsale/flashsale/internal/memo"
)

// Every Redis name the lock package uses is built here. Each lock's keys share
// one hash tag, {name}, so its scripts touch a single Redis Cluster slot.

// defaultPrefix starts every key; each lock kind adds its own part.
const defaultPrefix = "fs:"

// metaSep separates the fields of a mutex's value. Scripts compare the whole
// value, so the metadata is as much part of the owner check as the token.
const metaSep = "\x1f"

// maxKeyLen bounds lock names; longer names are almost certainly a bug (a
// request body used as a key) and would bloat every key and message.
const maxKeyLen = 512

type mutexKeys struct {
	lock    string // string: token, pid, acquired-at, host, label (metaSep between); in a table, the table's hash
	field   string // in a table (InTable): the lock's field; "" for a lock with keys of its own
	fence   string // integer counter: the highest fence minted (the table's, in a table)
	waiting string // set (with a short ttl) while some client waits (a field "w|<name>" in a table)
	channel string // pub/sub channel a release publishes on
}

// inTable reports whether the mutex is a field of a table (InTable).
func (k mutexKeys) inTable() bool { return k.field != "" }

// newTableKeys are the keys of mutex name kept in table (InTable): the
// table's hash and fence counter, shared by its locks, and a channel of
// the lock's own.
func newTableKeys(prefix, table, name string) mutexKeys {
	t := tableKeys.Get(tableOf{prefix, table})
	return mutexKeys{lock: t.lock, field: name, fence: t.fence, channel: t.channel + name}
}

// tableOf names a table; tableKeys remembers its keys (the lock's own are
// a field and a channel of the table's): built for every lock of a table
// before, two strings a lock (issue 43: each order's per-user lock).
type tableOf struct{ prefix, table string }

var tableKeys = memo.New(1024, func(t tableOf) mutexKeys {
	base := t.prefix + "ltab:{" + t.table + "}"
	return mutexKeys{lock: base, fence: base + ":fence", channel: base + ":released:"}
})

// keysFor are the keys of the mutex key obtained with o.
func keysFor(prefix, key string, o options) mutexKeys {
	if o.table != "" {
		return newTableKeys(prefix, o.table, key)
	}
	return newMutexKeys(prefix, key)
}

func newMutexKeys(prefix, name string) mutexKeys { return mutexKeysOf(prefix+"lock:", name) }

// newRedlockKeys are the keys Redlock uses on each of its nodes: a mutex's.
func newRedlockKeys(prefix, name string) mutexKeys { return mutexKeysOf(prefix+"redlock:", name) }

func mutexKeysOf(kindPrefix, name string) mutexKeys {
	base := kindPrefix + "{" + name + "}"
	return mutexKeys{
		lock:    base,
		fence:   base + ":fence",
		waiting: base + ":waiting",
		channel: base + ":released",
	}
}

type reentrantKeys struct {
	lock    string // hash: o:<owner> -> holds, ~fence, ~meta
	fence   string // integer counter
	channel string // pub/sub channel the last release publishes on
}

func newReentrantKeys(prefix, name string) reentrantKeys {
	base := prefix + "rlock:{" + name + "}"
	return reentrantKeys{lock: base, fence: base + ":fence", channel: base + ":released"}
}

type fairKeys struct {
	lock, fence, queue, waiters, arrivals string // in the order lib_fair.lua expects
	channel                               string // grants are published here
}

func newFairKeys(prefix, name string) fairKeys {
	base := prefix + "flock:{" + name + "}"
	return fairKeys{
		lock: base, fence: base + ":fence", queue: base + ":queue",
		waiters: base + ":waiters", arrivals: base + ":arrivals",
		channel: base + ":granted",
	}
}

func (k fairKeys) all() []string { return []string{k.lock, k.fence, k.queue, k.waiters, k.arrivals} }

// validateKey rejects names that cannot be hash-tagged safely. Braces would
// change which part of the key Redis Cluster hashes, splitting a lock's keys
// across slots.
func validateKey(name string) error {
	switch {
	case name == "":
		return invalidf("empty key")
	case len(name) > maxKeyLen:
		return invalidf("key longer than %d bytes", maxKeyLen)
	case strings.ContainsAny(name, "{}"):
		return invalidf("key %q contains '{' or '}'", name)
	}
	return nil
}

// validateTableKey rejects a name a table cannot hold apart from its
// waiting markers ("w|<name>"; lib_table.lua).
func validateTableKey(name string) error {
	if strings.Contains(name, "|") {
		return invalidf("key %q in a table contains '|'", name)
	}
	return nil
}

func validateTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalidf("ttl %v is below 1ms", ttl)
	}
	return nil
}
