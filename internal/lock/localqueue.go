package lock

import (
	"context"
	"sync"
	"time"
)

// A gate queues one process's waiters of one key, in arrival order. At most
// one goroutine at a time is "inside": the head, which talks to Redis to get
// the lock, and then the holder, which keeps the gate for its whole hold. So N
// local waiters cost Redis nothing while a local holder works.
//
// When the holder is done it passes the gate on to the first waiter with a
// grant: either the lock itself (a local handoff, no Redis round trip; see
// cohort in mutex.go) or the head role (go to Redis yourself).
type gate struct {
	set *gateSet
	key string

	mu    sync.Mutex
	busy  bool // a head or holder is inside
	queue []*waiter
	refs  int // goroutines using the gate; guarded by set.mu
}

type waiter struct {
	spec  holdSpec
	grant chan grant // buffered: a grant never blocks the granter
}

// grant is what a waiter receives when the gate passes to it.
type grant struct {
	lock *Lock // non-nil: the lock was handed over; the waiter holds it
	// yield: the waiter is the head and should let waiters in other
	// processes have a go first (see cohort.release).
	yield bool
}

// holdSpec is what a waiter asks for; a lock is handed over locally only to
// a waiter asking for exactly what the current hold provides.
type holdSpec struct {
	ttl  int64 // milliseconds
	opts options
}

// gateSet holds one gate per key that has local waiters or a local holder.
type gateSet struct {
	mu    sync.Mutex
	gates map[string]*gate
}

// enter waits at key's gate. It returns the gate and the grant that let the
// caller in: a zero grant when the gate was free.
func (s *gateSet) enter(ctx context.Context, key string, spec holdSpec) (*gate, grant, error) {
	s.mu.Lock()
	if s.gates == nil {
		s.gates = make(map[string]*gate)
	}
	g := s.gates[key]
	if g == nil {
		g = &gate{set: s, key: key}
		s.gates[key] = g
	}
	g.refs++
	s.mu.Unlock()

	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return g, grant{}, nil
	}
	w := &waiter{spec: spec, grant: make(chan grant, 1)}
	g.queue = append(g.queue, w)
	g.mu.Unlock()

	select {
	case gr := <-w.grant:
		return g, gr, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for i, q := range g.queue {
		if q == w {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			g.mu.Unlock()
			s.unref(g)
			return nil, grant{}, ctx.Err()
		}
	}
	g.mu.Unlock()
	// Granted while giving up: pass on what we were given.
	gr := <-w.grant
	if gr.lock != nil {
		// Bounded: a silent Redis must not hold the caller, whose context
		// has ended; a release that fails expires.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = gr.lock.Release(rctx)
		cancel()
	} else {
		g.leave(grant{yield: gr.yield})
	}
	return nil, grant{}, ctx.Err()
}

// popCompatible removes and returns the first waiter if it asks for spec.
// The caller holds g.mu.
func (g *gate) popCompatible(spec holdSpec) *waiter {
	if len(g.queue) == 0 || g.queue[0].spec != spec {
		return nil
	}
	w := g.queue[0]
	g.queue = g.queue[1:]
	return w
}

// leave passes the gate to the first waiter as its head (with gr), or frees
// it. The caller must be inside and must not use the gate afterwards.
func (g *gate) leave(gr grant) {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.busy = false
		g.mu.Unlock()
	} else {
		w := g.queue[0]
		g.queue = g.queue[1:]
		g.mu.Unlock()
		w.grant <- gr
	}
	g.set.unref(g)
}

// handTo gives w the lock l: w is inside from now on, as its holder.
func (g *gate) handTo(w *waiter, l *Lock) {
	w.grant <- grant{lock: l}
	g.set.unref(g) // the giver's reference; w holds its own
}

// gateKeyOf is the gate of the mutex key obtained with o: a process's
// waiters of one lock queue at one gate.
func gateKeyOf(key string, o options) string {
	if o.table != "" {
		return o.table + "\x00" + key
	}
	return key
}

// has reports whether someone in this process holds key's lock or waits
// for it (Client.Elide then says no: the step waits its turn).
func (s *gateSet) has(key string) bool {
	s.mu.Lock()
	_, ok := s.gates[key]
	s.mu.Unlock()
	return ok
}

func (s *gateSet) unref(g *gate) {
	s.mu.Lock()
	g.refs--
	if g.refs == 0 {
		delete(s.gates, g.key)
	}
	s.mu.Unlock()
}

// hasWaiters reports whether anyone is queued behind the gate's head.
func (g *gate) hasWaiters() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) > 0
}
