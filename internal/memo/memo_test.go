package memo_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale/internal/memo"
)

// A key's value is built once while it keeps its slot, and is always the
// value of that key, whatever else shares or takes the slot.
func TestCache_buildsOnce_alwaysTheKeysValue(t *testing.T) {
	var builds atomic.Int64
	c := memo.New(4, func(k int64) string { builds.Add(1); return "v" + strconv.FormatInt(k, 10) })
	for range 3 {
		if got := c.Get(7); got != "v7" {
			t.Fatalf("Get(7) = %q", got)
		}
	}
	if builds.Load() != 1 {
		t.Fatalf("built %d times for one key, want once", builds.Load())
	}
	// Far more keys than slots, from many goroutines: each answer is its
	// own key's (collisions rebuild, never mix), and the slots stay 4.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				k := int64(g*5000 + i%300)
				if got, want := c.Get(k), "v"+strconv.FormatInt(k, 10); got != want {
					t.Errorf("Get(%d) = %q, want %q", k, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A struct key of strings is compared whole: two keys that differ in one
// field are two values.
func TestCache_structKeys(t *testing.T) {
	type key struct{ a, b string }
	c := memo.New(1, func(k key) string { return k.a + "|" + k.b })
	if c.Get(key{"x", "y"}) != "x|y" || c.Get(key{"x", "z"}) != "x|z" || c.Get(key{"x", "y"}) != "x|y" {
		t.Fatal("a struct key's value mixed with another's")
	}
}

func BenchmarkCacheHit(b *testing.B) {
	c := memo.New(1024, func(k int64) string { return "order-user:" + strconv.FormatInt(k, 10) })
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = c.Get(int64(i % 16))
	}
}
