package loadtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// RedisMainCPU is the CPU time redis-server's main thread has used so far
// (INFO cpu: used_cpu_user_main_thread + used_cpu_sys_main_thread, Redis 7
// or later). The main thread is where commands and scripts run, so its
// difference over a run divided by the orders is what an order costs the
// one core a Redis shard has; the I/O threads and the AOF fsync thread are
// left out.
func RedisMainCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	found := 0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user_main_thread" || k == "used_cpu_sys_main_thread") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += f
			found++
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("INFO cpu has no main-thread figures (Redis 7 or later needed)")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// RedisCommandCalls is how many commands the server has run so far (INFO
// commandstats), the calls scripts made inside included.
func RedisCommandCalls(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	stats, err := RedisCommandStats(ctx, rdb)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, st := range stats {
		n += st.Calls
	}
	return n, nil
}

// CommandStat is one command's line of INFO commandstats (testenv's,
// which the tests' script counts read too).
type CommandStat = testenv.CommandStat

// RedisCommandStats is the server's INFO commandstats by command name
// ("evalsha", "hmget", ...).
func RedisCommandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]CommandStat, error) {
	return testenv.CommandStats(ctx, rdb)
}

// clockTick is the unit of /proc/<pid>/stat's CPU times: USER_HZ, which
// Linux fixes at 100 for user space on every architecture Go supports
// (sysconf(_SC_CLK_TCK) would need cgo to ask).
const clockTick = 10 * time.Millisecond

// CPUTime is the CPU time the process has used so far, user and system,
// all its threads (/proc/<pid>/stat utime + stime; 10 ms resolution, so
// measure over seconds, not milliseconds).
func (p *Proc) CPUTime() (time.Duration, error) { return procCPU(p.PID()) }

// ProcessCPU is what CPUTime is for any process by its id: a server the
// kit did not start as a Proc (Stack.RedisPID, Stack.MySQLPID).
func ProcessCPU(pid int) (time.Duration, error) { return procCPU(pid) }

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after its closing one are fixed: state is field 3, utime
	// 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
