package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/packets"
	"github.com/gorilla/websocket"
	"golang.org/x/net/proxy"

	"github.com/chatd/chatd/internal/wsstream"
)

// dialTimeout bounds one connection attempt's dial (TCP, TLS and WebSocket
// handshakes): autopaho hands AttemptConnection its manager's context,
// not the attempt's ConnectTimeout.
const dialTimeout = 10 * time.Second

// dial opens the connection of one attempt, as autopaho would (TCP, TLS or
// WebSocket by the URL's scheme; all_proxy is honoured for TCP and TLS,
// the HTTP proxy variables for WebSocket), and watches the CONNACK that
// comes back on it: autopaho reports a refused CONNECT without its user
// properties, and a refusal's retryAfter (docs/protocol.md) must set the
// wait before the next attempt (reconnectBackoff).
func (c *Client) dial(ctx context.Context, cfg autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var conn net.Conn
	switch u.Scheme {
	case "ws", "wss":
		d := *websocket.DefaultDialer
		d.TLSClientConfig = cfg.TlsCfg
		d.Subprotocols = []string{"mqtt"}
		ws, _, err := d.DialContext(ctx, u.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("open websocket %s: %w", u.Redacted(), err)
		}
		conn = wsstream.New(ws)
	case "mqtts", "tls", "ssl":
		raw, err := proxy.Dial(ctx, "tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", u.Host, err)
		}
		tc := &tls.Config{}
		if cfg.TlsCfg != nil {
			tc = cfg.TlsCfg.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = u.Hostname()
		}
		t := tls.Client(raw, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", u.Host, err)
		}
		conn = t
	default:
		raw, err := proxy.Dial(ctx, "tcp", u.Host)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", u.Host, err)
		}
		conn = raw
	}
	return &connackConn{Conn: conn, told: c.toldRetry}, nil
}

// connackConn is a connection whose first packet from the server, the
// CONNACK, is read on the way to paho: a refusal's retryAfter user
// property goes to told. paho writes a packet in several writes, from
// whichever goroutine publishes, acknowledges or pings, and holds the
// connection's lock across them (packets.WriteTo locks a sync.Locker):
// without it those writes interleave and the stream breaks. No wrapped
// connection keeps a packet whole by itself: a WebSocket sends each write
// as a message, TLS each as a record, and TCP loses its one writev to the
// wrapping.
type connackConn struct {
	net.Conn
	told func(time.Duration)
	mu   sync.Mutex // held across one packet's writes
	buf  []byte
	done bool
}

// Read is called by paho's one reader goroutine only.
func (c *connackConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		c.scan()
	}
	return n, err
}

// Lock and Unlock are paho's hold on the writes of one packet.
func (c *connackConn) Lock()   { c.mu.Lock() }
func (c *connackConn) Unlock() { c.mu.Unlock() }

// maxConnack bounds the CONNACK held to be read: chatd's are a few
// hundred bytes, while a remaining length may say up to 256 MB, which paho
// reads (and refuses) itself; holding a copy of it would double that.
const maxConnack = 64 << 10

// scan decodes the CONNACK once its bytes are all in. A first packet that
// is no CONNACK, or longer than maxConnack, is left to paho unread.
func (c *connackConn) scan() {
	if c.buf[0] != packets.CONNACK<<4 {
		c.done, c.buf = true, nil
		return
	}
	size, n := 0, 1 // remaining length, a varint of at most 4 bytes after the type byte
	for shift := 0; ; shift += 7 {
		if n >= len(c.buf) {
			return
		}
		if n > 4 {
			c.done, c.buf = true, nil // not MQTT: paho says so
			return
		}
		b := c.buf[n]
		n++
		size |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
	}
	if size > maxConnack {
		c.done, c.buf = true, nil
		return
	}
	if len(c.buf) < n+size {
		return
	}
	pk, err := packets.ReadPacket(bytes.NewReader(c.buf[:n+size]))
	c.done, c.buf = true, nil
	if err != nil {
		return
	}
	ca, ok := pk.Content.(*packets.Connack)
	if !ok || ca.ReasonCode < 0x80 || ca.Properties == nil {
		return
	}
	for _, u := range ca.Properties.User {
		if s, err := strconv.ParseInt(u.Value, 10, 64); u.Key == "retryAfter" && err == nil && s > 0 {
			c.told(time.Duration(s) * time.Second)
		}
	}
}

// toldRetry records the wait a refusing CONNACK asked for; the next
// reconnectBackoff honours it.
func (c *Client) toldRetry(d time.Duration) { c.told.Store(int64(d)) }

// reconnectBackoff is autopaho's wait before connection attempt n:
// backoff, stretched to what the last refusing CONNACK asked for
// (retryAfter).
func (c *Client) reconnectBackoff(n int) time.Duration {
	return toldWait(c.backoff(n), time.Duration(c.told.Swap(0)))
}
