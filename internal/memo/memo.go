// Package memo remembers values derived from keys that repeat — a sale's
// key names and lock options, the same for each of its orders — so that a
// hot path builds them once instead of for every call.
//
// A Cache is direct-mapped: a fixed number of slots, each holding the last
// key that hashed to it and its value, read and replaced lock-free. So it
// is bounded whatever keys callers send (an activity id from a request,
// existing or not, cannot grow it), a hit allocates nothing, and a
// collision only costs the colliding keys a rebuild. Values are shared
// between callers: they must not be changed once built (a slice returned
// with its capacity cut to its length, so that an append copies).
package memo

import (
	"hash/maphash"
	"sync/atomic"
)

// Cache maps keys to the values build makes of them.
type Cache[K comparable, V any] struct {
	seed  maphash.Seed
	build func(K) V
	slots []atomic.Pointer[entry[K, V]]
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a cache of slots slots (rounded up to a power of two) that
// builds a missing value with build.
func New[K comparable, V any](slots int, build func(K) V) *Cache[K, V] {
	n := 1
	for n < slots {
		n <<= 1
	}
	return &Cache[K, V]{seed: maphash.MakeSeed(), build: build, slots: make([]atomic.Pointer[entry[K, V]], n)}
}

// Get returns k's value: remembered, or built now and remembered in k's
// slot in place of what was there.
func (c *Cache[K, V]) Get(k K) V {
	slot := &c.slots[maphash.Comparable(c.seed, k)&uint64(len(c.slots)-1)]
	if e := slot.Load(); e != nil && e.k == k {
		return e.v
	}
	e := &entry[K, V]{k: k, v: c.build(k)}
	slot.Store(e)
	return e.v
}
