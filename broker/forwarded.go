package broker

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address of the client behind r when r comes from one
// of the trusted proxies and carries X-Forwarded-For: the header's entries
// are read from the right (the one the nearest proxy added) past those
// that are trusted proxies themselves, and the first that is not is the
// client (the leftmost, if all are). Anything else, a peer that is not
// trusted, no header, or an entry that is not an IP address on the way,
// answers false: the connection keeps its TCP peer, so no client can claim
// an address by sending the header itself, and a garbled chain is not
// guessed at. The port is unknown (0): the proxy's connection's port says
// nothing about the client.
func ClientAddr(r *http.Request, trusted []netip.Prefix) (netip.AddrPort, bool) {
	if len(trusted) == 0 {
		return netip.AddrPort{}, false
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !contains(trusted, peer.Addr().Unmap()) {
		return netip.AddrPort{}, false
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	if len(hops) == 0 {
		return netip.AddrPort{}, false
	}
	var a netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a, err = hopAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.AddrPort{}, false
		}
		if a = a.Unmap(); !contains(trusted, a) {
			break
		}
	}
	return netip.AddrPortFrom(a, 0), true
}

// hopAddr is the address of one X-Forwarded-For entry: an IP address,
// or one with the port the client connected from, as some proxies write
// it (Azure Application Gateway: 203.0.113.7:4711, [2001:db8::7]:4711).
// Refusing those would put every client behind such a proxy under its
// address, one for every per-address limit.
func hopAddr(hop string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(hop); err == nil {
		return a, nil
	}
	ap, err := netip.ParseAddrPort(hop)
	return ap.Addr(), err
}

func contains(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteConn is a connection that reports the client's address, not its
// TCP peer's, so mochi (and with it the per-IP connect limit and the logs)
// sees the client behind a proxy.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

// NetConn returns the connection wrapped (what its client's TCP
// acknowledged is read through it: internal/tcpacked).
func (c remoteConn) NetConn() net.Conn { return c.Conn }
