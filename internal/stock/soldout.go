package stock

import (
	"sync"
	"time"
)

// soldOut remembers, in this process, which activities ran out of stock, so
// the flood of requests after a sale sells out is refused without a Redis
// round trip. A flag clears when a restock notice arrives (a cancelled order
// gave units back) and, in case that notice was lost, after ttl: at most one
// request per activity per ttl then asks Redis again.
type soldOut struct {
	ttl   time.Duration
	mu    sync.RWMutex
	since map[int64]time.Time
}

func newSoldOut(ttl time.Duration) *soldOut {
	return &soldOut{ttl: ttl, since: make(map[int64]time.Time)}
}

func (s *soldOut) is(id int64) bool {
	s.mu.RLock()
	t, ok := s.since[id]
	s.mu.RUnlock()
	return ok && time.Since(t) < s.ttl
}

func (s *soldOut) set(id int64) {
	s.mu.Lock()
	s.since[id] = time.Now()
	s.mu.Unlock()
}

func (s *soldOut) clear(id int64) {
	s.mu.Lock()
	delete(s.since, id)
	s.mu.Unlock()
}
