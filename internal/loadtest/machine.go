package loadtest

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// CPUModel is the machine's CPU model as /proc/cpuinfo names it (the
// architecture where it cannot be read), for benchmarks' reports.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

// Machine is the CPU model and the CPUs this process may use: "AMD EPYC …,
// 2 CPUs".
func Machine() string { return fmt.Sprintf("%s, %d CPUs", CPUModel(), runtime.NumCPU()) }
