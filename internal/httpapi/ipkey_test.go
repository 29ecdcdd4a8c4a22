package httpapi

import "testing"

// The per-IP limit counts an IPv6 client by its /64: rotating the low 64
// bits, which any subscriber can, does not escape it.
func TestIPKey_ipv4AsIs_ipv6ByItsSlash64(t *testing.T) {
	for ip, want := range map[string]string{
		"203.0.113.7":                "203.0.113.7",
		"::ffff:203.0.113.7":         "203.0.113.7",
		"2001:db8:1:2::1":            "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:0:9": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":            "2001:db8:1:3::/64",
		"::1":                        "::/64",
		"not an ip":                  "not an ip",
	} {
		if got := ipKey(ip); got != want {
			t.Errorf("ipKey(%q) = %q, want %q", ip, got, want)
		}
	}
}
