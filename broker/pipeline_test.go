package broker

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chatd/chatd/internal/testcert"
	"github.com/chatd/chatd/internal/wsstream"
)

// mqttPacket is a packet of type typ (its first byte) with body after
// the fixed header.
func mqttPacket(typ byte, body ...[]byte) []byte {
	var all []byte
	for _, b := range body {
		all = append(all, b...)
	}
	pk := []byte{typ}
	for n := len(all); ; {
		b := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			b |= 0x80
		}
		pk = append(pk, b)
		if n == 0 {
			break
		}
	}
	return append(pk, all...)
}

// mqttStr is s with its two-byte length first.
func mqttStr(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

// connectSubscribePublish is what a client that does not wait for its
// CONNACK sends (paho's and mosquitto's queue packets behind the CONNECT):
// a CONNECT of level with client id id, then (rest) a SUBSCRIBE to t/id
// and a PUBLISH of "x" to it.
func connectSubscribePublish(level byte, id string) (connect, rest []byte) {
	var props []byte // v5: an empty property list in each
	if level == 5 {
		props = []byte{0}
	}
	topic := "t/" + id
	connect = mqttPacket(0x10, mqttStr("MQTT"), []byte{level, 0x02, 0, 30}, props, mqttStr(id))
	subscribe := mqttPacket(0x82, []byte{0, 1}, props, mqttStr(topic), []byte{0})
	publish := mqttPacket(0x30, mqttStr(topic), props, []byte("x"))
	return connect, append(subscribe, publish...)
}

// answers reads the packets the server sends on c until it has been
// quiet for quiet (or 10 s passed): their types, and the payload of each
// PUBLISH.
func answers(t *testing.T, c net.Conn, quiet time.Duration) (types []byte, payloads []string) {
	t.Helper()
	r := bufio.NewReader(c)
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		_ = c.SetReadDeadline(time.Now().Add(quiet))
		typ, err := r.ReadByte()
		if err != nil {
			if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("read: %v", err)
			}
			return types, payloads
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, mul := 0, 0
		for {
			b, err := r.ReadByte()
			if err != nil {
				t.Fatalf("read the length: %v", err)
			}
			n |= int(b&0x7f) << mul
			mul += 7
			if b&0x80 == 0 {
				break
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatalf("read the body: %v", err)
		}
		types = append(types, typ&0xf0)
		if typ&0xf0 == 0x30 {
			payloads = append(payloads, string(body[len(body)-1:]))
		}
	}
	return types, payloads
}

// The broker's connection keeps a copy of the CONNECT for the chat hook
// as the bytes pass through it to mochi: the packets a client sends right
// behind its CONNECT, in the same read or the reads after it, come through
// untouched, each once, in order (the SUBSCRIBE before the PUBLISH: the
// client gets its own message back, once), whatever the transport and
// however the CONNECT is cut: TCP, TLS under a PROXY protocol header,
// WebSocket (one frame, or a frame per byte), MQTT 5 and 3.1.1.
func TestPacketsRightBehindTheConnectAreReadOnceInOrder(t *testing.T) {
	srv, log := allowingServer(t)
	plain := NewTCPListener("tcp", "127.0.0.1:0", nil, log)
	certPEM, keyPEM := testcert.SelfSigned(t, "chatd")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	secure := NewTCPListener("tls", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}}, log)
	secure.wrap = ProxyProtocol([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	ws := NewWSListener("ws", nil, log)
	pending := newPendingConnects(0, nil)
	for _, l := range []*TCPListener{plain, secure} {
		l.clients, l.pending = &srv.Listeners.ClientsWg, pending
		if err := srv.AddListener(l); err != nil {
			t.Fatal(err)
		}
	}
	ws.clients, ws.pending = &srv.Listeners.ClientsWg, pending
	if err := srv.AddListener(ws); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ws)
	if err := srv.Serve(); err != nil {
		hs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { pending.cutAll(); _ = srv.Close(); hs.Close() })

	dial := map[string]func(t *testing.T) net.Conn{
		"tcp": func(t *testing.T) net.Conn { return dialFrom(t, "127.0.0.1", plain.Address()) },
		"tls behind a PROXY header": func(t *testing.T) net.Conn {
			c := dialFrom(t, "127.0.0.1", secure.Address())
			if _, err := io.WriteString(c, "PROXY TCP4 198.51.100.7 127.0.0.1 40000 8883\r\n"); err != nil {
				t.Fatal(err)
			}
			return tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		},
		"websocket": func(t *testing.T) net.Conn {
			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http")+"/mqtt", nil)
			if err != nil {
				t.Fatal(err)
			}
			return wsstream.New(c)
		},
	}
	for name, dial := range dial {
		for _, level := range []byte{5, 4} {
			for _, cut := range []int{0, 1} {
				id := fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(name, " ", "-"), level, cut)
				t.Run(id, func(t *testing.T) {
					c := dial(t)
					defer c.Close()
					_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
					connect, rest := connectSubscribePublish(level, id)
					out := append(connect, rest...)
					if cut > 0 {
						// The CONNECT a byte a write but its last, which
						// goes with the packets behind it.
						for _, b := range connect[:len(connect)-1] {
							if _, err := c.Write([]byte{b}); err != nil {
								t.Fatal(err)
							}
						}
						out = out[len(connect)-1:]
					}
					if _, err := c.Write(out); err != nil {
						t.Fatal(err)
					}
					types, payloads := answers(t, c, 500*time.Millisecond)
					if string(types) != "\x20\x90\x30" || len(payloads) != 1 || payloads[0] != "x" {
						t.Errorf("answered packet types % x, publishes %q: want CONNACK, SUBACK, the PUBLISH once (20 90 30)", types, payloads)
					}
				})
			}
		}
	}
}
