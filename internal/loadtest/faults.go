package loadtest

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// Faults the soak (internal/soak) injects into a running stack, besides
// Proc.Kill and Proc.Restart of an api or a worker. They live here, not in
// testenv's servers, because those servers' own fault methods report to a
// test (testing.TB) and the stack runs outside one.

// PauseRedis freezes redis-server (SIGSTOP), the primary with Sentinel:
// connections stay open and nothing answers until ResumeRedis, as in a long
// fork or a stalled disk. (With Sentinel a pause past the sentinels'
// down-after, two seconds here, is also a failover.)
// It returns the server's pid, for the log.
func (s *Stack) PauseRedis(ctx context.Context) (int, error) {
	pid, err := s.redisPID(ctx)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("pause redis-server (pid %d): %w", pid, err)
	}
	return pid, nil
}

// ResumeRedis continues a server PauseRedis froze (SIGCONT).
func (s *Stack) ResumeRedis(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume redis-server (pid %d): %w", pid, err)
	}
	return nil
}

// redisPID asks the server its pid (INFO server): testenv keeps the process
// to itself, and asking is correct for as long as the server runs.
func (s *Stack) redisPID(ctx context.Context) (int, error) {
	url := s.RedisURL
	if s.sentinel != nil { // the primary's
		addr, err := s.sentinel.PrimaryAddr(ctx)
		if err != nil {
			return 0, err
		}
		url = "redis://" + addr
	}
	return serverPID(ctx, url)
}

// ReplicaPIDs are the pids of the Sentinel topology's replicas (of every
// server but the primary now), for a benchmark to renice them; nil without
// Sentinel.
func (s *Stack) ReplicaPIDs(ctx context.Context) ([]int, error) {
	if s.sentinel == nil {
		return nil, nil
	}
	primary, err := s.sentinel.PrimaryAddr(ctx)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, srv := range append([]*testenv.RedisServer{s.sentinel.Primary}, s.sentinel.Replicas...) {
		if srv.Addr() == primary {
			continue
		}
		pid, err := serverPID(ctx, "redis://"+srv.Addr())
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

func serverPID(ctx context.Context, url string) (int, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return 0, err
	}
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := c.InfoMap(ctx, "server").Result()
	if err != nil {
		return 0, fmt.Errorf("redis-server pid: %w", err)
	}
	var pid int
	if _, err := fmt.Sscan(info["Server"]["process_id"], &pid); err != nil || pid <= 0 {
		return 0, fmt.Errorf("redis-server pid: INFO server says process_id %q", info["Server"]["process_id"])
	}
	return pid, nil
}

// StopMySQL shuts mariadbd down (SIGTERM) and waits until it has exited:
// every connection drops and new ones are refused until StartMySQL.
func (s *Stack) StopMySQL() { s.mysql.Stop() }

// StartMySQL starts mariadbd again on the same port and datadir after
// StopMySQL and waits until it answers.
func (s *Stack) StartMySQL() error { return s.mysql.Start() }

// KillRedisPrimary kills the Sentinel stack's primary (-9) and waits until
// the sentinels promote another server; then it restarts the old one as a
// replica of the new, as an operator would, so that acknowledged writes
// (one replica) can go on. It returns when it killed it and how long the
// promotion took.
func (s *Stack) KillRedisPrimary(ctx context.Context) (old, promoted string, killed time.Time, after time.Duration, err error) {
	if s.sentinel == nil {
		return "", "", killed, 0, fmt.Errorf("loadtest: no sentinels: start the stack with Sentinel")
	}
	if old, err = s.sentinel.PrimaryAddr(ctx); err != nil {
		return "", "", killed, 0, err
	}
	dead := s.sentinel.Server(old)
	if dead == nil {
		return "", "", killed, 0, fmt.Errorf("loadtest: the primary %s is none of the stack's servers", old)
	}
	killed = time.Now()
	dead.Kill()
	if promoted, err = s.sentinel.WaitPrimaryOtherThan(ctx, old); err != nil {
		return old, "", killed, 0, err
	}
	after = time.Since(killed)
	dead.RestartReplicaOf(promoted)
	return old, promoted, killed, after, nil
}
