package broker_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/chatd/chatd/broker"
)

func TestClientAddrBelievesXForwardedForOnlyFromTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	cases := []struct {
		name, peer string
		xff        []string
		want       string // "" = keep the TCP peer
	}{
		{"no proxy is trusted", "10.0.0.5:4000", []string{"203.0.113.7"}, ""},
		{"an untrusted peer claims an address", "192.0.2.1:4000", []string{"203.0.113.7"}, ""},
		{"a trusted proxy without the header", "10.0.0.5:4000", nil, ""},
		{"one hop", "10.0.0.5:4000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"the client's own claim left of the proxy's entry is ignored", "10.0.0.5:4000", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"trusted proxies in the chain are passed over", "10.0.0.5:4000", []string{"203.0.113.7, 10.1.2.3", "10.9.9.9"}, "203.0.113.7"},
		{"every hop a trusted proxy: the leftmost", "10.0.0.5:4000", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"a garbled entry on the way", "10.0.0.5:4000", []string{"203.0.113.7, unknown"}, ""},
		{"IPv6 behind an IPv6 proxy", "[2001:db8::1]:4000", []string{"2001:db8:ffff::1, 2a00::7"}, "2a00::7"},
		{"an entry with the client's port", "10.0.0.5:4000", []string{"203.0.113.7:4711"}, "203.0.113.7"},
		{"an IPv6 entry with the client's port", "10.0.0.5:4000", []string{"[2a00::7]:4711, 10.1.2.3:80"}, "2a00::7"},
		{"an entry with a port that is not one", "10.0.0.5:4000", []string{"203.0.113.7:http"}, ""},
		{"an IPv4-mapped peer", "[::ffff:10.0.0.5]:4000", []string{"203.0.113.7"}, "203.0.113.7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			tr := trusted
			if c.name == "no proxy is trusted" {
				tr = nil
			}
			got, ok := broker.ClientAddr(r, tr)
			switch {
			case c.want == "" && ok:
				t.Fatalf("got %v, want the TCP peer kept", got)
			case c.want != "" && (!ok || got.Addr() != netip.MustParseAddr(c.want) || got.Port() != 0):
				t.Fatalf("got %v %v, want %s:0", got, ok, c.want)
			}
		})
	}
}
