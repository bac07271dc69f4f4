// Package conncap counts, per client address, the connections a listener
// holds that have sent nothing worth their file descriptor yet, so that one
// address cannot hold thousands of them and exhaust the node's descriptors
// (every limit on what a client sends applies to something sent). The
// broker counts its MQTT connections that have not sent their CONNECT
// with Counts; HTTP caps the connections of the HTTP servers that have
// not sent a request, or are idle between two.
//
// An address is counted as the per-IP connect limit sees it (Key): an IPv4
// address itself, an IPv6 one its /64, since one host is handed a whole
// /64.
package conncap

import (
	"net"
	"net/netip"
)

// Key is what a connection from a is counted under: an IPv4 address (or
// an IPv4-mapped IPv6 one) itself, an IPv6 address its /64. The zero
// Prefix (an address that is not an IP address) is not counted.
func Key(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	if a = a.Unmap(); a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// RemoteIP is the IP address of conn's remote end (whatever conn's
// RemoteAddr says: behind the PROXY protocol, the client's); the zero Addr
// when it has none.
func RemoteIP(conn net.Conn) netip.Addr {
	ra := conn.RemoteAddr()
	if ra == nil {
		return netip.Addr{}
	}
	if ta, ok := ra.(*net.TCPAddr); ok {
		a, _ := netip.AddrFromSlice(ta.IP)
		return a
	}
	ap, err := netip.ParseAddrPort(ra.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// Counts counts connections by Key, at most Max under one key. Not safe
// for concurrent use: its owner holds its own lock around it, with the
// rest of what it tracks. Make one with NewCounts.
type Counts struct {
	// Max is how many connections one key may hold, 0: no cap.
	Max int
	n   map[netip.Prefix]int
}

// NewCounts counts at most max per key (0: no cap).
func NewCounts(max int) Counts {
	return Counts{Max: max, n: map[netip.Prefix]int{}}
}

// Admit counts one more connection under key, unless key already holds
// Max (false). The zero key is admitted and not counted.
func (c *Counts) Admit(key netip.Prefix) bool {
	if !key.IsValid() {
		return true
	}
	if c.Max > 0 && c.n[key] >= c.Max {
		return false
	}
	c.n[key]++
	return true
}

// Release counts one connection under key less.
func (c *Counts) Release(key netip.Prefix) {
	if !key.IsValid() {
		return
	}
	if c.n[key] <= 1 {
		delete(c.n, key)
		return
	}
	c.n[key]--
}

// Of is how many connections key holds.
func (c *Counts) Of(key netip.Prefix) int { return c.n[key] }
