package stock

import (
	"sync"
	"time"
)

// soldOut remembers, in this process, which activities ran out of stock —
// and which items of a sale of several — so the flood of requests after a
// sale (or an item) sells out is refused without a Redis round trip. A
// sale's flags clear together when a restock notice arrives (a cancelled
// order gave units back, an admin restocked: the notice says which sale,
// not which item, and clearing a flag costs at most one round trip) and,
// in case that notice was lost, after ttl: at most one request per
// activity (or item) per ttl then asks Redis again.
type soldOut struct {
	ttl   time.Duration
	mu    sync.RWMutex
	since map[int64]map[string]time.Time // activity -> item ("": the whole sale) -> when
}

func newSoldOut(ttl time.Duration) *soldOut {
	return &soldOut{ttl: ttl, since: make(map[int64]map[string]time.Time)}
}

// is reports whether activity id's item sku ("": the sale) is flagged.
func (s *soldOut) is(id int64, sku string) bool {
	s.mu.RLock()
	t, ok := s.since[id][sku]
	s.mu.RUnlock()
	return ok && time.Since(t) < s.ttl
}

func (s *soldOut) set(id int64, sku string) {
	s.mu.Lock()
	m := s.since[id]
	if m == nil {
		m = make(map[string]time.Time, 1)
		s.since[id] = m
	}
	m[sku] = time.Now()
	s.mu.Unlock()
}

// clear clears every flag of activity id: the sale's and its items'.
func (s *soldOut) clear(id int64) {
	s.mu.Lock()
	delete(s.since, id)
	s.mu.Unlock()
}
