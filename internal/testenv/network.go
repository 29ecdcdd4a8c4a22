package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Network makes the processes of a test stack hosts on a network whose
// every link can be broken on its own, as on real machines. Each process
// (a redis-server, a sentinel, an api, a worker) runs as a host: in a
// private mount namespace (unshare -m) with its own /etc/hosts, where every
// server's name — redis-a, sentinel-1, mysql — resolves to a loopback
// address of that host's own (127.H.S.1), on which a toxiproxy proxy
// listens, on the server's port, forwarding to the server (which listens
// on 127.0.0.1 alone). So every (host, server) pair is one link, one proxy,
// and a fault on it hits that pair alone: api1 cut from the Redis primary
// while api2 reaches it; the primary cut from its replica and the
// sentinels but still reached by one api (a split brain).
//
// Redis finds its peers by these names too: a replica is started with
// replicaof redis-a, every server announces its name (replica-announce-ip),
// and the sentinels resolve and announce names (resolve-hostnames,
// announce-hostnames), so what they tell clients and replicas after a
// failover is a name each host resolves to its own link. The sentinels
// reach each other directly (127.0.0.1, what they detect and gossip): the
// links between sentinels are not modelled. The harness itself (the test,
// the soak's checker) is no host: it reaches every server directly
// (Direct).
//
// Needs root (a mount namespace and a bind mount) and util-linux's
// unshare; no network namespace and no netem: the kernel here has none.
type Network struct {
	Proxy *Toxiproxy
	dir   string

	mu      sync.Mutex
	hosts   []string       // host i (1-based) uses 127.(10+i).S.1
	servers map[string]int // name -> port (on 127.0.0.1)
	order   []string       // servers in the order added: server s uses 127.H.s.1
	links   map[[2]string]*toxiproxy.Proxy
}

// LaunchNetwork starts a network's toxiproxy-server; dir holds the hosts'
// files. Close stops it.
func LaunchNetwork(dir string) (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("testenv: a Network runs each process in a mount namespace of its own, which needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return nil, fmt.Errorf("testenv: unshare (util-linux) not found: %w", err)
	}
	tp, err := LaunchToxiproxy()
	if err != nil {
		return nil, err
	}
	return &Network{Proxy: tp, dir: dir, servers: map[string]int{}, links: map[[2]string]*toxiproxy.Proxy{}}, nil
}

// StartNetwork is LaunchNetwork in a test: its files in a temp dir, closed
// when the test ends.
func StartNetwork(t testing.TB) *Network {
	t.Helper()
	n, err := LaunchNetwork(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// Close stops the proxies: every link is gone.
func (n *Network) Close() { n.Proxy.Close() }

// AddHost declares a host (a process to run with Command): its hosts file
// names every server, each through its own link. A host may be a server
// too (redis-a replicates from redis-b after a failover); its own name
// resolves to 127.0.0.1.
func (n *Network) AddHost(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hostIndex(name) > 0 {
		return nil
	}
	n.hosts = append(n.hosts, name)
	for _, s := range n.order {
		if err := n.link(name, s); err != nil {
			return err
		}
	}
	return n.writeHosts(name)
}

// AddServer declares that the server name listens on 127.0.0.1:port: every
// host, present and future, reaches it by name through its own link.
func (n *Network) AddServer(name string, port int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.servers[name]; ok {
		if p != port {
			return fmt.Errorf("testenv: server %s is on port %d, not %d", name, p, port)
		}
		return nil
	}
	n.servers[name] = port
	n.order = append(n.order, name)
	for _, h := range n.hosts {
		if err := n.link(h, name); err != nil {
			return err
		}
		if err := n.writeHosts(h); err != nil {
			return err
		}
	}
	return nil
}

func (n *Network) hostIndex(name string) int {
	for i, h := range n.hosts {
		if h == name {
			return i + 1
		}
	}
	return 0
}

func (n *Network) serverIndex(name string) int {
	for i, s := range n.order {
		if s == name {
			return i + 1
		}
	}
	return 0
}

// linkIP is where host h reaches server s.
func (n *Network) linkIP(h, s string) string {
	return fmt.Sprintf("127.%d.%d.1", 10+n.hostIndex(h), n.serverIndex(s))
}

func (n *Network) link(h, s string) error {
	if h == s {
		return nil
	}
	port := strconv.Itoa(n.servers[s])
	p, err := n.Proxy.Client.CreateProxy(h+">"+s, net.JoinHostPort(n.linkIP(h, s), port), "127.0.0.1:"+port)
	if err != nil {
		return fmt.Errorf("testenv: link %s>%s: %w", h, s, err)
	}
	n.links[[2]string{h, s}] = p
	return nil
}

// writeHosts rewrites host h's hosts file in place: its bind mount shows
// the new content to a process already running (same inode).
func (n *Network) writeHosts(h string) error {
	var b strings.Builder
	b.WriteString("# written by internal/testenv's Network: every server through this host's own link\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, s := range n.order {
		ip := n.linkIP(h, s)
		if s == h {
			ip = "127.0.0.1"
		}
		fmt.Fprintf(&b, "%s\t%s\n", ip, s)
	}
	f, err := os.OpenFile(n.hostsFile(h), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (n *Network) hostsFile(h string) string { return filepath.Join(n.dir, "hosts-"+h) }

// Command is exec.Command(bin, args...) run as host h: in a mount namespace
// of its own whose /etc/hosts is h's. The process's pid is unshare's, which
// execs the shell, which execs bin: signals reach bin.
func (n *Network) Command(h, bin string, args ...string) *exec.Cmd {
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	return exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, n.hostsFile(h), bin}, args...)...)
}

// Addr is how a host calls server s: "s:port".
func (n *Network) Addr(s string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return net.JoinHostPort(s, strconv.Itoa(n.servers[s]))
}

// Direct turns an address a host uses ("redis-b:6390", say, as a sentinel
// answers) into the server's own ("127.0.0.1:6390"), for the harness, which
// is no host. Any other address is returned as it is.
func (n *Network) Direct(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.servers[host]; ok && strconv.Itoa(p) == port {
		return "127.0.0.1:" + port
	}
	return addr
}

// Named is Direct's inverse: a server's own address ("127.0.0.1:6390") as
// hosts call it ("redis-b:6390"). Any other address is returned as it is.
func (n *Network) Named(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		return addr
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, p := range n.servers {
		if strconv.Itoa(p) == port {
			return net.JoinHostPort(name, port)
		}
	}
	return addr
}

// Dial is a dialer for the harness's clients (go-redis's Dialer): it dials
// Direct(addr).
func (n *Network) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, n.Direct(addr))
}

// Link is the proxy on the link from host h to server s.
func (n *Network) Link(h, s string) (*toxiproxy.Proxy, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.links[[2]string{h, s}]
	if !ok {
		return nil, fmt.Errorf("testenv: no link %s>%s (hosts %v, servers %v)", h, s, n.hosts, n.order)
	}
	return p, nil
}

// IsServer tells whether name is a server of the network.
func (n *Network) IsServer(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.servers[name]
	return ok
}

// Partition cuts the network in two: every link from a host of one side to
// a server of the other, both ways. Names on neither side keep their links
// (MariaDB, say, reached by both). HealAll ends it.
func (n *Network) Partition(a, b []string) error {
	for _, pair := range [][2][]string{{a, b}, {b, a}} {
		for _, h := range pair[0] {
			for _, s := range pair[1] {
				if !n.IsServer(s) {
					continue
				}
				if err := n.Cut(h, s, Both); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Links are the names of every link ("h>s"), sorted.
func (n *Network) Links() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k := range n.links {
		out = append(out, k[0]+">"+k[1])
	}
	sort.Strings(out)
	return out
}
