package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// dialWSFrom opens MQTT over WebSocket to srv from the local address from
// (127.0.0.x), sending X-Forwarded-For xff, as a proxy in front of chatd
// would, and returns the CONNACK's reason code (0: connected).
func dialWSFrom(t *testing.T, srv *server.Server, from, xff, clientID string) byte {
	t.Helper()
	local := &net.TCPAddr{IP: net.ParseIP(from)}
	d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{LocalAddr: local}).DialContext(ctx, network, addr)
		}}
	ws, _, err := d.Dial("ws://"+srv.HTTPAddr()+"/mqtt", http.Header{"X-Forwarded-For": {xff}})
	if err != nil {
		t.Fatalf("websocket from %s: %v", from, err)
	}
	c, ack, err := mqtttest.DialConn(mqtttest.WrapWS(ws), mqtttest.Options{Version: 5, ClientID: clientID, Password: testnode.Token(t, 1), Clean: true})
	if err != nil {
		if ack.ReasonCode == 0 {
			t.Fatalf("connect %s over websocket: %v", clientID, err)
		}
		return ack.ReasonCode
	}
	t.Cleanup(c.Drop)
	return 0
}

// Behind an HTTP proxy every WebSocket shares the proxy's address: with
// forwarded_trusted naming the proxy, the per-IP connect limit counts the
// client X-Forwarded-For names instead, and a peer that is not trusted
// cannot pick its address by sending the header.
func TestWebSocketClientsBehindATrustedProxyEachHaveTheirOwnConnectLimit(t *testing.T) {
	t.Parallel()
	connectAll(t, limitedBehindProxy(t), []wsConnect{
		{"127.0.0.1", "203.0.113.7", "a", 0, "first client through the proxy"},
		{"127.0.0.1", "203.0.113.7", "a2", 0x9F, "the same client through the proxy again"},
		{"127.0.0.1", "198.51.100.1, 198.51.100.9", "b", 0, "another client behind the same proxy: its own budget"},
		// 127.0.0.2 is no trusted proxy: its header changes nothing.
		{"127.0.0.2", "192.0.2.1", "c", 0, "first connect from an untrusted peer"},
		{"127.0.0.2", "192.0.2.2", "c2", 0x9F, "an untrusted peer claiming another address (its own address is over the limit)"},
	})
}

// limitedBehindProxy is a node behind a trusted proxy at 127.0.0.1 that
// allows one connect per client address.
func limitedBehindProxy(t *testing.T) *server.Server {
	return testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), map[string]string{
		"CHAT_FORWARDED_TRUSTED":  "127.0.0.1",
		"CHAT_LIMIT_CONNECT_RATE": "0.001", "CHAT_LIMIT_CONNECT_BURST": "1"}), nil)
}

// wsConnect is a WebSocket CONNECT from peer with X-Forwarded-For xff,
// and the CONNACK reason code it must get.
type wsConnect struct {
	peer, xff, clientID string
	want                byte
	what                string
}

func connectAll(t *testing.T, srv *server.Server, cs []wsConnect) {
	t.Helper()
	for _, c := range cs {
		if code := dialWSFrom(t, srv, c.peer, c.xff, c.clientID); code != c.want {
			t.Fatalf("%s: CONNACK 0x%02x, want 0x%02x", c.what, code, c.want)
		}
	}
}

// An IPv6 host is given a whole /64 (a VPS, a phone's mobile data, a
// home network), so it can connect from 2^64 addresses: counted per
// address, the per-IP connect limit would not hold it back at all, and one
// host could take the node's whole connect budget. IPv6 clients are
// counted per /64; IPv4 ones per address.
func TestIPv6ClientsOfOneSlash64ShareOneConnectLimit(t *testing.T) {
	t.Parallel()
	connectAll(t, limitedBehindProxy(t), []wsConnect{
		{"127.0.0.1", "2001:db8:1:2::1", "v6-a", 0, "first client of 2001:db8:1:2::/64"},
		{"127.0.0.1", "2001:db8:1:2:ffff:1234:5678:9abc", "v6-a2", 0x9F, "another address of the same /64"},
		{"127.0.0.1", "2001:db8:1:3::1", "v6-b", 0, "a client of another /64: its own budget"},
		// IPv4 stays per address, however close.
		{"127.0.0.1", "203.0.113.7", "v4-a", 0, "IPv4 client"},
		{"127.0.0.1", "203.0.113.8", "v4-b", 0, "IPv4 neighbour: its own budget"},
	})
}
