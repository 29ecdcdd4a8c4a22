package loadtest

import (
	"os"
	"testing"
	"time"
)

// The process's CPU time from /proc follows CPU spent: 300 ms of spinning
// shows as at least 200 ms (10 ms ticks, and the scheduler may share the
// core), and sleeping adds next to nothing.
func TestProcCPU_followsCPUSpent(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	spun, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := spun - before; got < 200*time.Millisecond || got > 2*time.Second {
		t.Fatalf("300 ms of spinning (%d loops) counted as %v", x, got)
	}
	time.Sleep(300 * time.Millisecond)
	slept, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := slept - spun; got > 100*time.Millisecond {
		t.Fatalf("300 ms asleep counted as %v of CPU", got)
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Fatal("no error for a pid that does not exist")
	}
}
