package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelGroup is the topology operators run Redis in: a primary, its
// replicas, and sentinels that promote a replica when the primary fails.
// Every process is a throwaway redis-server the test may kill, pause and
// restart.
type SentinelGroup struct {
	MasterName string
	Primary    *RedisServer   // the primary it started with (after a failover, a replica or dead)
	Replicas   []*RedisServer // the replicas it started with
	Sentinels  []*RedisServer
	// Network, when the group was started on one (RedisConfig.Network):
	// its servers are hosts redis-a (the first primary), redis-b, … and
	// sentinel-1, …; URL names them, and the group's own methods reach
	// them directly.
	Network *Network
}

// Failover timing of the group's sentinels: the primary is judged down after
// sentinelDownAfter without an answer; a failover then takes about a second
// more on loopback.
//
// Not 1 s, although that fails over faster: a sentinel that switches to a
// new primary resets its link's clocks (act_ping_time and last_pong_time to
// now, sentinelResetMaster) and sends its first PING only a ping period
// (1 s, or down-after if less) later, in the same timer tick that checks
// for down-after without a PONG. With down-after at 1 s that tick judges
// the primary it has just chosen down before its PONG can come back, and
// the leader fails over again at once, to the old primary when a partition
// has just healed (seen: TestNetwork_splitBrain_…, two runs in three).
// Twice the ping period leaves the PONG a second.
const (
	sentinelDownAfter     = 2000 * time.Millisecond
	sentinelFailoverLimit = 10 * time.Second
)

// sentinelConf writes the sentinel's config file (Sentinel rewrites it, so
// it cannot be flags alone) and returns its path.
func (s *RedisServer) sentinelConf() string {
	host, port, _ := strings.Cut(s.config.MasterAddr, ":")
	names := "no" // on a Network, the servers are known by name (Network's comment)
	if s.config.Network != nil {
		names = "yes"
	}
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
daemonize no
protected-mode no
sentinel resolve-hostnames %s
sentinel announce-hostnames %s
sentinel monitor %s %s %s %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, s.port, s.dir, filepath.Join(s.dir, "sentinel.log"), names, names,
		s.config.MasterName, host, port, s.config.Quorum,
		s.config.MasterName, sentinelDownAfter.Milliseconds(),
		s.config.MasterName, sentinelFailoverLimit.Milliseconds(), s.config.MasterName)
	path := filepath.Join(s.dir, "sentinel.conf")
	if _, err := os.Stat(path); err != nil { // a restarted sentinel keeps what it learned
		_ = os.WriteFile(path, []byte(conf), 0o644)
	}
	return path
}

// StartSentinelGroup starts a primary (with cfg: append-only, say), n
// replicas of it and m sentinels (quorum m/2+1) watching it as "flashsale",
// and waits until the sentinels know every replica. All die with the test.
func StartSentinelGroup(t testing.TB, cfg RedisConfig, replicas, sentinels int) *SentinelGroup {
	t.Helper()
	g, err := newSentinelGroup(func(c RedisConfig) (*RedisServer, error) { return StartRedisWith(t, c), nil },
		cfg, replicas, sentinels)
	if err != nil {
		t.Fatalf("testenv: sentinel group: %v", err)
	}
	return g
}

// LaunchSentinelGroup is StartSentinelGroup outside a test (the load-test
// kit and the benchmarks); Close stops every process of it.
func LaunchSentinelGroup(cfg RedisConfig, replicas, sentinels int) (*SentinelGroup, error) {
	var started []*RedisServer
	g, err := newSentinelGroup(func(c RedisConfig) (*RedisServer, error) {
		s, err := LaunchRedis(c)
		if err == nil {
			started = append(started, s)
		}
		return s, err
	}, cfg, replicas, sentinels)
	if err != nil {
		for _, s := range started {
			s.Close()
		}
		return nil, err
	}
	return g, nil
}

// Close stops every process of a group started by LaunchSentinelGroup.
func (g *SentinelGroup) Close() {
	for _, s := range append(append([]*RedisServer{g.Primary}, g.Replicas...), g.Sentinels...) {
		s.Close()
	}
}

func newSentinelGroup(start func(RedisConfig) (*RedisServer, error), cfg RedisConfig, replicas, sentinels int) (*SentinelGroup, error) {
	g := &SentinelGroup{MasterName: "flashsale", Network: cfg.Network}
	var err error
	pc := cfg
	pc.Host = "redis-a"
	if g.Primary, err = start(pc); err != nil {
		return nil, err
	}
	primary := g.Primary.Addr()
	if g.Network != nil {
		primary = g.Network.Addr(pc.Host)
	}
	for i := range replicas {
		rc := cfg
		rc.ReplicaOf, rc.Host = primary, fmt.Sprintf("redis-%c", 'b'+i)
		s, err := start(rc)
		if err != nil {
			return nil, err
		}
		g.Replicas = append(g.Replicas, s)
	}
	for i := range sentinels {
		s, err := start(RedisConfig{Sentinel: true, MasterName: g.MasterName, MasterAddr: primary, Quorum: sentinels/2 + 1,
			Network: cfg.Network, Host: fmt.Sprintf("sentinel-%d", i+1)})
		if err != nil {
			return nil, err
		}
		g.Sentinels = append(g.Sentinels, s)
	}
	return g, g.waitKnown(replicas, 30*time.Second)
}

// waitKnown waits until the primary has n replicas online (their first
// sync done) and every sentinel reports the primary, the n replicas and the
// other sentinels: ready to fail over.
func (g *SentinelGroup) waitKnown(n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := WaitReplicasOnline(ctx, g.Primary.Addr(), n); err != nil {
		return err
	}
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		defer sc.Close()
		for {
			m, err := sc.Master(ctx, g.MasterName).Result()
			if err == nil && m["num-slaves"] == strconv.Itoa(n) && m["num-other-sentinels"] == strconv.Itoa(len(g.Sentinels)-1) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("sentinel %s does not know the group after %v: %v %v", s.Addr(), timeout, m, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// URL is REDIS_URL for the service in Sentinel mode
// (REDIS_SENTINEL_MASTER=MasterName): the sentinels, the first as host,
// the others as addr parameters.
// On a Network the sentinels are named, as its hosts reach them.
func (g *SentinelGroup) URL() string {
	addr := func(s *RedisServer) string {
		if g.Network != nil {
			return g.Network.Addr(s.config.Host)
		}
		return s.Addr()
	}
	u := "redis://" + addr(g.Sentinels[0]) + "/0"
	for i, s := range g.Sentinels[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + addr(s)
	}
	return u
}

// PrimaryAddr asks a sentinel which server is the primary now.
func (g *SentinelGroup) PrimaryAddr(ctx context.Context) (string, error) {
	var last error
	for _, s := range g.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		addr, err := sc.GetMasterAddrByName(ctx, g.MasterName).Result()
		sc.Close()
		if err == nil && len(addr) == 2 {
			if g.Network != nil { // a name: the harness reaches it directly
				return g.Network.Direct(addr[0] + ":" + addr[1]), nil
			}
			return addr[0] + ":" + addr[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel names the primary: %v", last)
}

// WaitPrimaryOtherThan waits until the sentinels name a primary other than
// old (a failover finished) and that server answers as a primary; it
// returns the new primary's address.
func (g *SentinelGroup) WaitPrimaryOtherThan(ctx context.Context, old string) (string, error) {
	for {
		addr, err := g.PrimaryAddr(ctx)
		if err == nil && addr != old {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			role, rerr := c.Do(ctx, "ROLE").Slice()
			c.Close()
			if rerr == nil && len(role) > 0 && role[0] == "master" {
				return addr, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no failover away from %s: %w (last: %s, %v)", old, ctx.Err(), addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Server returns the group's process at addr (the primary or a replica).
func (g *SentinelGroup) Server(addr string) *RedisServer {
	for _, s := range append([]*RedisServer{g.Primary}, g.Replicas...) {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// WaitReplicasOnline waits until the primary at addr reports n replicas
// whose sync is done (state=online), so that WAIT can count them.
func WaitReplicasOnline(ctx context.Context, addr string, n int) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Count(info, "state=online") >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not %d replicas online: %v\n%s", addr, n, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SentinelAddrs are the sentinels' host:port.
func (g *SentinelGroup) SentinelAddrs() []string {
	var out []string
	for _, s := range g.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// Client is a go-redis client of whichever server the sentinels name as
// primary, closed when the test ends.
func (g *SentinelGroup) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.MasterName, SentinelAddrs: g.SentinelAddrs(),
		ContextTimeoutEnabled: true, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// FailOverLosing kills the primary right after write ran on it, with the
// replica frozen meanwhile so that write never reaches it, then lets the
// sentinels promote that replica: the failover that loses what the primary
// acknowledged last. It returns the new primary's address.
func (g *SentinelGroup) FailOverLosing(t testing.TB, write func()) string {
	t.Helper()
	if len(g.Replicas) != 1 {
		t.Fatalf("testenv: FailOverLosing wants one replica, the group has %d", len(g.Replicas))
	}
	old := g.Primary.Addr()
	// Frozen, the replica cannot reconnect; and its link is cut before the
	// write, since bytes already sent would still reach it from its socket.
	g.Replicas[0].Pause()
	c := redis.NewClient(&redis.Options{Addr: old})
	err := c.ClientKillByFilter(context.Background(), "TYPE", "replica").Err()
	c.Close()
	if err != nil {
		g.Replicas[0].Resume()
		t.Fatalf("testenv: CLIENT KILL TYPE replica: %v", err)
	}
	write()
	g.Primary.Kill()
	g.Replicas[0].Resume() // frozen well under the sentinels' down-after: still a candidate
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, err := g.WaitPrimaryOtherThan(ctx, old)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return addr
}
