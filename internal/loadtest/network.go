package loadtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// What the network's faults (StackOptions.Network; the soak's issue 28
// kinds) need to know of a stack: which host plays which part.

// RedisPrimary names the Redis server that is primary now ("redis-a"), as
// the network's hosts call it: the sentinels' answer with Sentinel.
func (s *Stack) RedisPrimary(ctx context.Context) (string, error) {
	if s.Net == nil {
		return "", fmt.Errorf("loadtest: the stack has no network (StackOptions.Network)")
	}
	if s.sentinel == nil {
		return "redis-a", nil
	}
	addr, err := s.sentinel.PrimaryAddr(ctx)
	if err != nil {
		return "", err
	}
	host, _, err := net.SplitHostPort(s.Net.Named(addr))
	return host, err
}

// RedisServers names every Redis server (not the sentinels), and Sentinels
// every sentinel, as the network's hosts call them.
func (s *Stack) RedisServers() []string {
	if s.sentinel == nil {
		return []string{"redis-a"}
	}
	out := []string{"redis-a"}
	for i := range s.sentinel.Replicas {
		out = append(out, fmt.Sprintf("redis-%c", 'b'+i))
	}
	return out
}

// ReplOffset is Redis server name's replication offset (INFO replication's
// master_repl_offset): how many bytes of writes its history holds. Read
// directly, whatever the network's faults.
func (s *Stack) ReplOffset(ctx context.Context, name string) (int64, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Net.Direct(s.Net.Addr(name)), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("loadtest: %s: no master_repl_offset in INFO replication", name)
}

// ProcNames names the apis and the workers, as hosts of the network.
func (s *Stack) ProcNames() []string {
	var out []string
	for _, p := range append(append([]*Proc{}, s.APIs...), s.Workers...) {
		out = append(out, p.Name)
	}
	return out
}

// Sentinels names the sentinels; none without Sentinel.
func (s *Stack) Sentinels() []string {
	if s.sentinel == nil {
		return nil
	}
	var out []string
	for i := range s.sentinel.Sentinels {
		out = append(out, fmt.Sprintf("sentinel-%d", i+1))
	}
	return out
}

// WaitRecovered waits until the stack serves again after a fault healed:
// every api and worker ready (/readyz 200) and, with Sentinel, the primary
// with its replica online (acknowledged writes can be made). It returns how
// long that took, or an error after timeout.
func (s *Stack) WaitRecovered(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for _, p := range append(append([]*Proc{}, s.APIs...), s.Workers...) {
		for {
			resp, err := hc.Get("http://" + p.Addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if ctx.Err() != nil {
				return time.Since(start), fmt.Errorf("%s not ready %v after the heal", p.Name, timeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if s.sentinel != nil {
		// The primary is asked again each time round: the sentinels may
		// fail over once more after a heal (a split brain's old primary,
		// still resyncing, promoted back when the new one was slow to
		// answer: seen 2026-11-26), and waiting on the one first named
		// would wait for ever.
		var last error
		for {
			addr, err := s.sentinel.PrimaryAddr(ctx)
			if err == nil {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				err = testenv.WaitReplicasOnline(pctx, addr, len(s.sentinel.Replicas))
				cancel()
				if err == nil {
					break
				}
			}
			last = err
			if ctx.Err() != nil {
				return time.Since(start), fmt.Errorf("after the heal: %w", last)
			}
		}
	}
	return time.Since(start), nil
}
