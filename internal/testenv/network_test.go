package testenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/testenv"
)

// ping runs redis-cli PING against server s as host h, bounded by a
// timeout: "PONG", or what went wrong.
func ping(n *testenv.Network, h, s string) string {
	host, port, _ := strings.Cut(n.Addr(s), ":")
	cmd := n.Command(h, "timeout", "2", "redis-cli", "-h", host, "-p", port, "PING")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)) + " (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

// A link is one pair: cutting cli1's link to a server leaves cli2's, and
// healing it brings cli1 back. Each host finds the server by name.
func TestNetwork_aCutLink_hitsThatPairAlone(t *testing.T) {
	n := testenv.StartNetwork(t)
	testenv.StartRedisWith(t, testenv.RedisConfig{Network: n, Host: "redis-a"})
	for _, h := range []string{"cli1", "cli2"} {
		if err := n.AddHost(h); err != nil {
			t.Fatal(err)
		}
		if got := ping(n, h, "redis-a"); got != "PONG" {
			t.Fatalf("%s: PING redis-a: %s", h, got)
		}
	}
	if err := n.Cut("cli1", "redis-a", testenv.Both); err != nil {
		t.Fatal(err)
	}
	if got := ping(n, "cli1", "redis-a"); got == "PONG" {
		t.Fatal("cli1 reached redis-a through a cut link")
	}
	if got := ping(n, "cli2", "redis-a"); got != "PONG" {
		t.Fatalf("cli2, whose link is whole: %s", got)
	}
	if err := n.Heal("cli1", "redis-a"); err != nil {
		t.Fatal(err)
	}
	if got := ping(n, "cli1", "redis-a"); got != "PONG" {
		t.Fatalf("cli1 after the heal: %s", got)
	}
	// One way: requests reach the server, replies do not.
	if err := n.Cut("cli1", "redis-a", "downstream"); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(n.Addr("redis-a"), ":")
	if out, err := n.Command("cli1", "timeout", "2", "redis-cli", "-h", host, "-p", port, "SET", "oneway", "ran").CombinedOutput(); err == nil {
		t.Fatalf("cli1 got a reply through a link cut downstream: %s", out)
	}
	if got := ping(n, "cli2", "redis-a"); got != "PONG" {
		t.Fatalf("cli2: %s", got)
	}
	rdb := redis.NewClient(&redis.Options{Addr: n.Direct(n.Addr("redis-a"))})
	defer rdb.Close()
	if v, err := rdb.Get(context.Background(), "oneway").Result(); err != nil || v != "ran" {
		t.Fatalf("the SET whose reply was cut: %q, %v; want it run", v, err)
	}
}

// Split brain on real sentinels: the primary cut from its replica and from
// every sentinel, but not from a client; the sentinels promote the
// replica, the client still writes to the old primary; healed, the old
// primary is turned into the new one's replica by name, and what it alone
// took is gone.
func TestNetwork_splitBrain_sentinelsPromoteByName_oldPrimaryRejoins(t *testing.T) {
	n := testenv.StartNetwork(t)
	g := testenv.StartSentinelGroup(t, testenv.RedisConfig{Network: n}, 1, 3)
	if !strings.HasPrefix(g.URL(), "redis://sentinel-1:") {
		t.Fatalf("URL %s: want the sentinels by name", g.URL())
	}
	if err := n.AddHost("cli"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"redis-b", "sentinel-1", "sentinel-2", "sentinel-3"} {
		if err := n.Cut(h, "redis-a", testenv.Both); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := g.Primary.Addr()
	promoted, err := g.WaitPrimaryOtherThan(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != g.Replicas[0].Addr() {
		t.Fatalf("promoted %s, want the replica %s", promoted, g.Replicas[0].Addr())
	}
	host, port, _ := strings.Cut(n.Addr("redis-a"), ":")
	if out, err := n.Command("cli", "timeout", "2", "redis-cli", "-h", host, "-p", port, "SET", "lonely", "write").CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "OK" {
		t.Fatalf("the client on the old primary's side: %s %v", out, err)
	}
	if err := n.HealAll(); err != nil {
		t.Fatal(err)
	}
	a := redis.NewClient(&redis.Options{Addr: old})
	defer a.Close()
	for {
		role, err := a.Do(ctx, "ROLE").Slice()
		if err == nil && role[0] == "slave" && role[1] == "redis-b" {
			break
		}
		if ctx.Err() != nil {
			for _, sn := range g.Sentinels {
				out, _ := os.ReadFile(filepath.Join(sn.Dir(), "sentinel.log"))
				t.Logf("%s:\n%s", sn.Addr(), out)
			}
			t.Fatalf("the old primary after the heal: %v %v; want a replica of redis-b", role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := testenv.WaitReplicasOnline(ctx, promoted, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Exists(ctx, "lonely").Result(); err != nil || n != 0 {
		t.Fatalf("the write the old primary alone took: exists %d, %v; want it dropped by the resync", n, err)
	}
}

// The harness's addresses and the hosts' names map both ways.
func TestNetwork_directAndNamed(t *testing.T) {
	n := testenv.StartNetwork(t)
	srv := testenv.StartRedisWith(t, testenv.RedisConfig{Network: n, Host: "redis-a"})
	named := n.Addr("redis-a")
	if n.Direct(named) != srv.Addr() || n.Named(srv.Addr()) != named {
		t.Fatalf("Direct(%s) = %s, Named(%s) = %s", named, n.Direct(named), srv.Addr(), n.Named(srv.Addr()))
	}
}
