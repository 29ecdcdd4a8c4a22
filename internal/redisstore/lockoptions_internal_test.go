package redisstore

import (
	"testing"

	"github.com/flashsale/flashsale/internal/order"
)

// lockOptions are remembered and shared: no allocation for options seen
// before, and capped at their length, so a caller's append copies them
// instead of writing into what others are given.
func TestLockOptions_remembered_appendCopies(t *testing.T) {
	o := order.LockOptions{Family: "order-user", NoFence: true, Set: "order-user:7"}
	first := lockOptions(o)
	if len(first) != 3 || cap(first) != len(first) {
		t.Fatalf("%d options, capacity %d: want 3, capped", len(first), cap(first))
	}
	if n := testing.AllocsPerRun(100, func() { _ = lockOptions(o) }); n != 0 {
		t.Fatalf("%v allocations for options seen before, want 0", n)
	}
	if got := lockOptions(order.LockOptions{Family: "x"}); len(got) != 1 {
		t.Fatalf("other options: %d, want 1 (the family alone)", len(got))
	}
}
