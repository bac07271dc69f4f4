package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/pires/go-proxyproto"
)

// addSecure adds the MQTT over TLS listener and the secure WebSocket
// listener the configuration asks for.
func (b *Broker) addSecure() error {
	cfg := b.cfg
	if cfg.MQTTSAddr != "" {
		if cfg.MQTTSTLS == nil {
			return errors.New("listen mqtts: no TLS configuration")
		}
		b.tcps = NewTCPListener("tls", cfg.MQTTSAddr, cfg.MQTTSTLS, cfg.Logger.With("component", "mqtt"))
		b.tcps.wrap, b.tcps.ended, b.tcps.clients, b.tcps.pending = cfg.WrapListener, cfg.Hook.ConnectionEnded, &b.Server.Listeners.ClientsWg, b.pending
		if err := b.Server.AddListener(b.tcps); err != nil {
			return fmt.Errorf("listen mqtts on %s: %w", cfg.MQTTSAddr, err)
		}
	}
	if cfg.SecureWS {
		b.wss = NewWSListener("wss", cfg.AllowedOrigins, cfg.Logger)
		b.wss.ended, b.wss.trusted, b.wss.clients, b.wss.pending = cfg.Hook.ConnectionEnded, cfg.ForwardedTrusted, &b.Server.Listeners.ClientsWg, b.pending
		b.wss.readLimit = wsMessageLimit(b.Server.Options.Capabilities.MaximumPacketSize)
		if err := b.Server.AddListener(b.wss); err != nil {
			return fmt.Errorf("add secure websocket listener: %w", err)
		}
	}
	return nil
}

func (b *Broker) closeSecure() {
	if b.tcps != nil {
		b.tcps.Close(func(string) {})
	}
	if b.wss != nil {
		b.wss.Close(func(string) {})
	}
}

// MQTTSAddr is the bound MQTT over TLS address ("" without one).
func (b *Broker) MQTTSAddr() string {
	if b.tcps == nil {
		return ""
	}
	return b.tcps.Address()
}

// SecureWebSocket returns the handler to mount at /mqtt on the HTTPS
// server (nil unless Config.SecureWS). Its connections count as transport
// "wss"; it checks origins like the plain one.
func (b *Broker) SecureWebSocket() *WSListener { return b.wss }

// ProxyProtocol returns a WrapListener that reads PROXY protocol v1 and v2
// headers on connections from the trusted networks and uses the client
// address they carry (net.Conn.RemoteAddr, so logs and the per-IP connect
// limit see it). A trusted connection without a header keeps its own
// address; a connection from elsewhere that sends one is closed, so no
// client can claim an address. The header must arrive within
// ConnectTimeout.
func ProxyProtocol(trusted []netip.Prefix) func(net.Listener) net.Listener {
	policy := func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
		if ap, err := netip.ParseAddrPort(o.Upstream.String()); err == nil && contains(trusted, ap.Addr().Unmap()) {
			return proxyproto.USE, nil
		}
		return proxyproto.REJECT, nil
	}
	return func(ln net.Listener) net.Listener {
		return &proxyproto.Listener{Listener: ln, ConnPolicy: policy, ReadHeaderTimeout: ConnectTimeout}
	}
}

// proxyRefused reads the PROXY header of a connection from a ProxyProtocol
// listener (under TLS, if any) and returns why it is refused: a header from
// an untrusted peer, a malformed one, or none in time. Refused connections
// never reach mochi. Other connections return nil at once.
func proxyRefused(conn net.Conn) error {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	pc, ok := conn.(*proxyproto.Conn)
	if !ok {
		return nil
	}
	_, err := pc.Read(nil) // processes the header, reads no payload
	return err
}

// untrustedProxyPeer is the address of conn's TCP peer when conn comes
// from a ProxyProtocol listener and the peer is not in its trusted
// networks: a header from it is refused, so the peer's address is the
// client's, known before any header is read. ok is false for any other
// connection.
func untrustedProxyPeer(conn net.Conn) (netip.Addr, bool) {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	pc, ok := conn.(*proxyproto.Conn)
	if !ok || pc.ProxyHeaderPolicy != proxyproto.REJECT {
		return netip.Addr{}, false
	}
	return remoteIP(pc.Raw()), true
}

// peerAddr is the TCP peer of conn (the load balancer, for a proxied one).
func peerAddr(conn net.Conn) string {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if pc, ok := conn.(*proxyproto.Conn); ok {
		return pc.Raw().RemoteAddr().String()
	}
	return conn.RemoteAddr().String()
}
