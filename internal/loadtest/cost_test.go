package loadtest

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The process's CPU time from /proc follows CPU spent: spinning until the
// kernel's own account of this process (getrusage) grew by 300 ms shows as
// that much, to within a few 10 ms ticks, and sleeping adds next to
// nothing. The spin is measured by CPU, not by the clock: on a loaded
// 2-core CI machine 300 ms of wall time gave the spinner only 150 ms of CPU.
func TestProcCPU_followsCPUSpent(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	r0 := rusageCPU(t)
	x := 0
	for start := time.Now(); rusageCPU(t)-r0 < 300*time.Millisecond; x++ {
		for range 100_000 {
			x++
		}
		if time.Since(start) > time.Minute {
			t.Fatal("300 ms of CPU not had in a minute")
		}
	}
	spun, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	spent := rusageCPU(t) - r0
	if got := spun - before; got < spent-50*time.Millisecond || got > spent+50*time.Millisecond {
		t.Fatalf("%v of spinning (%d loops) counted as %v", spent, x, got)
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

// rusageCPU is this process's user and system CPU time, as getrusage has it.
func rusageCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
