package loadtest

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
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

// INFO commandstats read by command: three INCRs, and a script that makes
// two GETs, show as such, with the script's time including its GETs'.
func TestRedisCommandStats_countsEachCommand_scriptsInnerCallsToo(t *testing.T) {
	rdb := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	for range 3 {
		rdb.Incr(ctx, "n")
	}
	if err := rdb.Eval(ctx, "redis.call('GET', KEYS[1]); return redis.call('GET', KEYS[1])", []string{"n"}).Err(); err != nil {
		t.Fatal(err)
	}
	stats, err := RedisCommandStats(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if stats["incr"].Calls != 3 || stats["get"].Calls != 2 || stats["eval"].Calls != 1 || stats["eval"].Usec < stats["get"].Usec {
		t.Fatalf("commandstats %+v", stats)
	}
	n, err := RedisCommandCalls(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, st := range stats {
		sum += st.Calls
	}
	if n < sum || n > sum+1 { // the INFO that read stats is counted once it ran
		t.Fatalf("%d commands in all, %d by name", n, sum)
	}
}
