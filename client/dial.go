package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
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
	return &connackConn{Conn: conn, told: c.toldRetry, disconnected: c.serverDisconnected}, nil
}

// connackConn is a connection whose first packet from the server, the
// CONNACK, is read on the way to paho: a refusal's retryAfter user
// property goes to told. The fixed headers of the packets after it are
// followed too, so that a DISCONNECT's reason code reaches disconnected
// before paho reports the connection down: autopaho passes the reason on
// only in a goroutine of its own, which may run after it reconnected,
// and whether to reconnect depends on it (a takeover). It also hands
// each packet paho writes to the wrapped connection in one write. paho
// writes a packet in several writes (packets.WriteTo: the fixed header,
// then each part), from whichever goroutine publishes, acknowledges or
// pings, holding the connection's lock across them (it is a
// sync.Locker): without the lock those writes interleave and the stream
// breaks. Written apart, a packet would also go
// as several WebSocket messages, TLS records or TCP segments (the one
// writev a bare *net.TCPConn makes of them is lost to the wrapping), so
// the writes made under the lock are gathered until the packet is whole.
type connackConn struct {
	net.Conn
	told func(time.Duration)
	mu   sync.Mutex // paho's: held across one packet's writes
	wmu  sync.Mutex // guards gather and out; one write to Conn at a time
	// gather: mu is held, writes are parts of a packet, gathered in out.
	gather bool
	out    []byte
	buf    []byte
	done   bool

	// The packets after the CONNACK (watch): the fixed header read so
	// far, the bytes of the current packet left to pass, and whether the
	// next byte is a DISCONNECT's reason code.
	disconnected func(reason byte)
	watching     bool
	hdr          []byte
	skip         int
	reasonNext   bool
}

// Read is called by paho's one reader goroutine only.
func (c *connackConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	switch {
	case n == 0:
	case !c.done:
		c.buf = append(c.buf, p[:n]...)
		c.scan()
	case c.watching:
		c.watch(p[:n])
	}
	return n, err
}

// watch follows the packets in b, the next bytes from the server, by
// their fixed headers, and hands a DISCONNECT's reason code (0 when it has
// none) to disconnected. It stops at a header that is no MQTT's: paho
// ends the connection then.
func (c *connackConn) watch(b []byte) {
	for len(b) > 0 && c.watching {
		if c.skip > 0 {
			if c.reasonNext {
				c.reasonNext = false
				c.disconnected(b[0])
			}
			n := min(c.skip, len(b))
			c.skip -= n
			b = b[n:]
			continue
		}
		c.hdr = append(c.hdr, b[0])
		b = b[1:]
		size := packetSize(c.hdr)
		switch {
		case size < 0:
			c.watching = false
		case size > 0:
			if c.hdr[0] == packets.DISCONNECT<<4 {
				if size == len(c.hdr) {
					c.disconnected(0)
				} else {
					c.reasonNext = true
				}
			}
			c.skip = size - len(c.hdr)
			c.hdr = c.hdr[:0]
		}
	}
}

// Lock and Unlock are paho's hold on the writes of one packet.
func (c *connackConn) Lock() {
	c.mu.Lock()
	c.wmu.Lock()
	c.gather = true
	c.wmu.Unlock()
}

// Unlock sends what is left gathered, should paho's writes have made no
// whole packet; its error can reach no caller, so it closes the
// connection, which paho's reader then reports.
func (c *connackConn) Unlock() {
	c.wmu.Lock()
	if len(c.out) > 0 {
		if err := c.flush(); err != nil {
			c.Conn.Close()
		}
	}
	c.gather = false
	c.wmu.Unlock()
	c.mu.Unlock()
}

// Write sends p at once, unless the lock is held: then p is a part of a
// packet (paho writes only under the lock), and the write that makes the
// packet whole sends it all and returns that send's error.
func (c *connackConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.gather {
		return c.Conn.Write(p)
	}
	c.out = append(c.out, p...)
	switch size := packetSize(c.out); {
	case size == 0:
		return len(p), nil
	case len(c.out) < size:
		c.out = slices.Grow(c.out, size-len(c.out)) // one copy of a large payload, not several
		return len(p), nil
	}
	if err := c.flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// maxKeptOut bounds the gathering buffer kept between packets: a large
// publish's is let go.
const maxKeptOut = 64 << 10

// flush sends the gathered bytes in one write.
func (c *connackConn) flush() error {
	_, err := c.Conn.Write(c.out)
	if cap(c.out) > maxKeptOut {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return err
}

// packetSize reads the fixed header at the start of b: the whole packet's
// length, 0 while the header is not all in b, -1 if it is no MQTT header
// (a remaining length longer than 4 bytes).
func packetSize(b []byte) int {
	size := 0
	for i, shift := 1, 0; i < len(b); i, shift = i+1, shift+7 {
		if i > 4 {
			return -1
		}
		size |= int(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return i + 1 + size
		}
	}
	return 0
}

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
	size := packetSize(c.buf)
	if size < 0 { // not MQTT: paho says so
		c.done, c.buf = true, nil
		return
	}
	if size > maxConnack { // no CONNACK of chatd's
		c.watchFrom()
		return
	}
	if size == 0 || len(c.buf) < size {
		return
	}
	pk, err := packets.ReadPacket(bytes.NewReader(c.buf[:size]))
	c.watchFrom()
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

// watchFrom ends the CONNACK's scan and follows the packets from the
// CONNACK on, with the bytes read so far.
func (c *connackConn) watchFrom() {
	b := c.buf
	c.done, c.buf = true, nil
	c.watching = c.disconnected != nil
	c.watch(b)
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
