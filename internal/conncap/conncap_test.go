package conncap

import (
	"net/netip"
	"testing"
)

// An IPv4 address, mapped or not, counts as itself; an IPv6 one as its
// /64, zone dropped, since one host is handed a whole /64; no address is
// not counted.
func TestKeyIsTheIPv4AddressOrTheIPv6Slash64(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.0.2.7", "192.0.2.7/32"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
	} {
		if got := Key(netip.MustParseAddr(c.addr)); got != netip.MustParsePrefix(c.want) {
			t.Errorf("Key(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
	if got := Key(netip.Addr{}); got.IsValid() {
		t.Errorf("Key of no address = %s, want none", got)
	}
}

// Counts admits up to Max per key, each key apart, and a released slot is
// admitted again; the zero key is always admitted and never counted.
func TestCountsAdmitUpToMaxPerKey(t *testing.T) {
	c := NewCounts(2)
	a, b := Key(netip.MustParseAddr("192.0.2.1")), Key(netip.MustParseAddr("192.0.2.2"))
	for i, want := range []bool{true, true, false} {
		if got := c.Admit(a); got != want {
			t.Fatalf("connection %d of one key admitted %v, want %v (max 2)", i+1, got, want)
		}
	}
	if !c.Admit(b) {
		t.Fatal("another key refused")
	}
	c.Release(a)
	if c.Of(a) != 1 || !c.Admit(a) {
		t.Fatalf("after a release: %d counted, a new one refused", c.Of(a))
	}
	for range 3 {
		if !c.Admit(netip.Prefix{}) {
			t.Fatal("the zero key refused")
		}
	}
	if n := c.Of(netip.Prefix{}); n != 0 {
		t.Fatalf("the zero key counted %d", n)
	}
}
