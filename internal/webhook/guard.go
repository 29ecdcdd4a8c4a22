package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"

	"github.com/flashsale/flashsale/internal/refusal"
)

// ErrPrivateAddress is a delivery refused because the endpoint's host
// resolved to an address that is not public (Guard).
var ErrPrivateAddress = errors.New("webhook: the endpoint's address is not public")

// Resolver resolves host names (net.Resolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard keeps deliveries off private addresses, so an endpoint cannot make
// the worker call what only it can reach: the cloud's metadata service,
// Redis, MySQL, an admin port on the worker's network. It checks an
// endpoint's URL when it is set (every address its host resolves to), and
// every connection a delivery opens (Control), since a name can resolve to
// a public address then and a private one later (DNS rebinding).
type Guard struct {
	// AllowPrivate lets every address through (WEBHOOK_ALLOW_PRIVATE: tests,
	// embedded mode, a receiver on the shop's own network).
	AllowPrivate bool
	// Resolver resolves hosts for CheckURL. Default net.DefaultResolver.
	Resolver Resolver
}

// CheckURL says what is wrong with raw as an endpoint's URL (a refusal of
// ErrInvalid naming the field url), or nil: see checkURL, and its host must
// resolve, each of its addresses public unless AllowPrivate.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	if err := checkURL(raw); err != nil {
		return err
	}
	if g.AllowPrivate {
		return nil
	}
	u, _ := url.Parse(raw) // checkURL parsed it
	host := u.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
			return refusal.OfField(ErrInvalid, "url", "url: the host %q does not resolve", host)
		}
	}
	for _, a := range addrs {
		if !Public(a) {
			return refusal.OfField(ErrInvalid, "url",
				"url: %s resolves to %s, which is not a public address (WEBHOOK_ALLOW_PRIVATE=true allows it)", host, a)
		}
	}
	return nil
}

// Control is a net.Dialer's Control: it refuses a connection to an address
// that is not public, after resolution, whatever name led there.
func (g Guard) Control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrPrivateAddress, address)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
	}
	return nil
}

// notPublic are the IPv4 ranges a webhook may not reach (IANA's special-
// purpose registry, RFC 6890 and its updates): this network, private,
// CGNAT, loopback, link-local (169.254.169.254, the cloud metadata service),
// IETF protocol assignments, documentation, 6to4 relay, benchmarking,
// multicast, reserved and broadcast.
var notPublic4 = prefixes("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4")

// notPublic6 are the IPv6 ranges likewise: unspecified, loopback, the
// deprecated IPv4-compatible form, discard, Teredo (its IPv4 is hidden),
// documentation, unique local, link-local, site-local, multicast, and
// local-use NAT64. (IPv4-mapped addresses are judged as IPv4, and NAT64's
// and 6to4's by the IPv4 inside: Public.)
var notPublic6 = prefixes("::/127", "::/96", "100::/64", "2001::/32", "2001:db8::/32", "fc00::/7", "fe80::/10",
	"fec0::/10", "ff00::/8", "64:ff9b:1::/48")

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func prefixes(ps ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// Public reports whether a webhook may be sent to a: a unicast address on
// the public internet.
func Public(a netip.Addr) bool {
	a = a.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if !a.IsValid() {
		return false
	}
	in := func(ps []netip.Prefix) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if a.Is4() {
		return !in(notPublic4)
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return Public(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(a):
		return Public(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	return !in(notPublic6)
}
