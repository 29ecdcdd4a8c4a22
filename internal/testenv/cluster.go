package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a Redis Cluster of throwaway redis-server processes, each
// a master owning an equal share of the 16,384 hash slots (no replicas).
type RedisCluster struct {
	Nodes []*RedisServer
}

// StartRedisCluster starts n (≥ 3, as Redis Cluster wants) redis-servers in
// cluster mode, assigns the slots, introduces the nodes to each other with
// CLUSTER MEET and waits until every node reports cluster_state:ok. It is
// done through commands rather than `redis-cli --cluster create` so it needs
// no more than redis-server.
func StartRedisCluster(t testing.TB, n int) *RedisCluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("testenv: a Redis Cluster needs at least 3 masters, not %d", n)
	}
	c := &RedisCluster{}
	for range n {
		c.Nodes = append(c.Nodes, StartRedisWith(t, RedisConfig{Cluster: true}))
	}
	if err := c.form(); err != nil {
		t.Fatal(err)
	}
	return c
}

// LaunchRedisCluster is StartRedisCluster for programs that are not tests
// (the load-test kit, the benchmarks' stacks): each master with cfg (and
// Cluster on); Close stops them.
func LaunchRedisCluster(n int, cfg RedisConfig) (*RedisCluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("testenv: a Redis Cluster needs at least 3 masters, not %d", n)
	}
	cfg.Cluster = true
	c := &RedisCluster{}
	for range n {
		node, err := LaunchRedis(cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	if err := c.form(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close stops the masters of a LaunchRedisCluster and removes their dirs.
func (c *RedisCluster) Close() {
	for _, node := range c.Nodes {
		node.Close()
	}
}

// form makes the nodes one cluster: an equal run of slots each, met, and
// each reporting cluster_state:ok.
func (c *RedisCluster) form() error {
	n := len(c.Nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*redis.Client, n)
	for i, node := range c.Nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: node.Addr()})
		defer clients[i].Close()
	}
	const slots = 16384
	for i, rc := range clients {
		from, to := i*slots/n, (i+1)*slots/n-1
		args := []any{"CLUSTER", "ADDSLOTS"}
		for s := from; s <= to; s++ {
			args = append(args, s)
		}
		if err := rc.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("testenv: CLUSTER ADDSLOTS %d-%d on %s: %w", from, to, c.Nodes[i].Addr(), err)
		}
	}
	for _, node := range c.Nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(node.port)).Err(); err != nil {
			return fmt.Errorf("testenv: CLUSTER MEET %s: %w", node.Addr(), err)
		}
	}
	for i, rc := range clients {
		for {
			info, err := rc.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("testenv: cluster node %s not ok: %v\n%s", c.Nodes[i].Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// URL is the cluster in the form go-redis's ParseClusterURL reads, and so
// REDIS_URL with REDIS_CLUSTER=true: redis://first?addr=second&addr=third.
func (c *RedisCluster) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + c.Nodes[0].Addr())
	for i, node := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		fmt.Fprintf(&b, "%saddr=%s", sep, node.Addr())
	}
	return b.String()
}

// Client returns a cluster client, closed when the test ends.
func (c *RedisCluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	addrs := make([]string, len(c.Nodes))
	for i, node := range c.Nodes {
		addrs[i] = node.Addr()
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		PoolSize: 64,
	})
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}
