package order

import "testing"

// A sale's per-user lock options are built once (memo): an order of a
// sale seen before allocates nothing for them, and they are the sale's.
func TestUserLockOptions_remembered_perSale(t *testing.T) {
	if got := userLockOptions(42); got != (LockOptions{Family: "order-user", NoFence: true, Set: "order-user:42"}) {
		t.Fatalf("userLockOptions(42) = %+v", got)
	}
	if userLockOptions(43).Set != "order-user:43" {
		t.Fatal("another sale's options mixed with the first's")
	}
	if n := testing.AllocsPerRun(100, func() { _ = userLockOptions(42) }); n != 0 {
		t.Fatalf("%v allocations for a sale seen before, want 0", n)
	}
}
