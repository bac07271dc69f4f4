package broker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mochi-mqtt/server/v2/packets"
)

// MaxConnectSize bounds the CONNECT packet, the first one a connection
// sends, whatever the Maximum Packet Size: mochi allocates a packet's
// announced length as soon as its fixed header arrives, and the CONNECT is
// read before the client is authenticated, so without this bound anyone
// could make the node hold a whole packet's worth of memory (grown with
// the body limit, 164 KiB by default) per stalled connection for the
// connect timeout. A CONNECT carries a client id (at most 256 bytes), a
// user name and a token: 64 KiB leaves room for any identity provider's.
const MaxConnectSize = 64 << 10

// errConnectTooLarge ends a connection whose first packet announces more
// than MaxConnectSize (MQTT 5: after CONNACK 0x95, tooLarge).
var errConnectTooLarge = errors.New("the CONNECT packet announces more than the connect size limit")

// connectCapped is a connection whose first packet may announce at most
// MaxConnectSize bytes after its fixed header, and whose keepalive timeout
// is exact (keepalive.go); mochi sees it in place of the accepted
// connection (the same value is handed to the listener's ended callback).
// Unwrap gives the accepted one (a *tls.Conn's client certificate is read
// from it).
type connectCapped struct {
	net.Conn
	hdr     [5]byte // the first packet's fixed header as far as read
	n       int     // bytes of hdr filled
	checked bool
	// connect is the first packet's body, when it is a CONNECT within
	// MaxConnectSize, as far as read (while keeping), and size its
	// announced length: the hook looks at the bytes of the CONNECT mochi's
	// decoding forgets (ConnectPacket). Kept as it arrives, never ahead
	// of it. Once whole (read whole, not yet taken), it belongs to whoever
	// swaps whole to false first: the hook (ConnectPacket), right after
	// mochi decoded it, or Close, when mochi could not (unreadable).
	connect []byte
	size    int
	keeping bool
	whole   atomic.Bool
	timeout atomic.Int64     // 1.5 × keepalive (a time.Duration); 0 until SetKeepalive
	pending *pendingConnects // the connections waiting for their CONNECT, nil: not counted
	// pendingKey is what pending counts it under (conncap.Key).
	pendingKey netip.Prefix
}

// Unwrap returns the connection the listener accepted.
func (c *connectCapped) Unwrap() net.Conn { return c.Conn }

func (c *connectCapped) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	b := p[:n]
	if !c.checked {
		used, cerr := c.check(b)
		if cerr != nil {
			return 0, cerr
		}
		b = b[used:]
	}
	if c.keeping {
		c.keep(b)
	}
	return n, err
}

// keepChunk is how much of a CONNECT's body is allocated for at once: a
// CONNECT with a JWT is 1-2 KiB, kept in one allocation, while a peer
// that announces MaxConnectSize and stalls makes the broker hold no more
// than it sent (mochi holds the announced size already).
const keepChunk = 4 << 10

// keep adds what b holds of the CONNECT's body to connect.
func (c *connectCapped) keep(b []byte) {
	b = b[:min(len(b), c.size-len(c.connect))]
	if c.connect == nil {
		c.connect = make([]byte, 0, min(c.size, max(keepChunk, len(b))))
	}
	c.connect = append(c.connect, b...)
	if len(c.connect) == c.size {
		c.keeping = false
		c.whole.Store(true)
	}
}

// Close answers a CONNECT mochi could not decode (unreadable) before it
// closes the connection: mochi closes it right after trying, without a
// hook, so the CONNECT read whole that no hook took is one mochi could
// not read. A CONNECT decoded is taken by the hook (ConnectPacket) and
// costs no second decoding here.
func (c *connectCapped) Close() error {
	if c.whole.CompareAndSwap(true, false) {
		body := c.connect
		c.connect = nil
		c.unreadable(body)
	}
	return c.Conn.Close()
}

// unreadable answers body, a CONNECT read whole that no hook took, when
// mochi cannot decode it (a field cut short, a string that is not UTF-8,
// broken or unknown v5 properties): mochi closes such a connection as
// soon as it has read it, before any hook, and says nothing. An MQTT 5
// one gets CONNACK 0x81 malformed packet first, with what mochi found
// wrong as its reason string, which MQTT 5 allows before the close
// [MQTT-3.1.4-1]: a device's developer sees which field to fix, where a
// bare close looks like a network failure to retry for ever. MQTT 3.1.1 wants the connection
// closed without a CONNACK [MQTT-3.1.4-1], as does a CONNECT whose level
// is not 5 (its form unknown). Each is counted (pending.unreadable). The
// same decoding as mochi's, of the same bytes: it fails exactly when
// mochi's did (without a hook to take it, as in the broker's own tests,
// a CONNECT mochi read is decoded here again, and passes).
func (c *connectCapped) unreadable(body []byte) {
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect, Remaining: c.size}}
	err := pk.ConnectDecode(body)
	if err == nil {
		return
	}
	v5 := len(body) >= len(v5ConnectStart) && string(body[:len(v5ConnectStart)]) == string(v5ConnectStart)
	if c.pending != nil && c.pending.unreadable != nil {
		c.pending.unreadable()
	}
	if !v5 {
		return
	}
	connack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ProtocolVersion: 5,
		ReasonCode: packets.ErrMalformedPacket.Code, Properties: packets.Properties{ReasonString: malformedReason(err)}}
	var buf bytes.Buffer
	if connack.ConnackEncode(&buf) != nil {
		return
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Conn.Write(buf.Bytes())
}

// ConnectPacket gives up the body of the connection's first packet, a
// CONNECT (after its fixed header), once read whole; nil when the first
// packet was none, announced more than MaxConnectSize, or was taken
// already. mochi calls the hook's OnPacketRead on the goroutine that
// reads the connection, right after reading the CONNECT: the hook takes
// it there, so the copy lives no longer than mochi's decoding of it.
func (c *connectCapped) ConnectPacket() []byte {
	if !c.whole.CompareAndSwap(true, false) {
		return nil
	}
	b := c.connect
	c.connect = nil
	return b
}

// maxReason bounds the reason string of CONNACK 0x81: the CONNECT's
// Maximum Packet Size is unknown, so the answer is short.
const maxReason = 256

// malformedReason is the reason string of CONNACK 0x81 for err, mochi's
// reason for not reading a CONNECT: a UTF-8 string as MQTT 5 requires of
// one (valid, no U+0000 [MQTT-1.5.4-1] [MQTT-1.5.4-2], which a client
// closes the connection for), within maxReason. mochi's reasons are its
// own words and numbers today; a byte of the CONNECT one day quoted in
// them is dropped if it is no printable character, so the answer cannot
// carry what a client would refuse or a terminal would act on.
func malformedReason(err error) string {
	reason := err.Error()
	if !strings.HasPrefix(reason, packets.ErrMalformedPacket.Reason) {
		reason = packets.ErrMalformedPacket.Reason + ": " + reason
	}
	var out strings.Builder
	for _, r := range reason {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			continue
		}
		if out.Len()+utf8.RuneLen(r) > maxReason {
			break
		}
		out.WriteRune(r)
	}
	return out.String()
}

// check reads the first packet's fixed header from what the connection
// gives, as it comes: a type byte, then the remaining length in one to
// four bytes of seven bits each; used is how many bytes of b it took. A
// CONNECT over MaxConnectSize of MQTT 5 is told so (tooLarge) before the
// connection closes; one within it is kept (connect).
func (c *connectCapped) check(b []byte) (used int, err error) {
	for _, x := range b {
		if c.n == len(c.hdr) {
			break
		}
		c.hdr[c.n] = x
		c.n++
		used++
		if c.n > 1 && x&0x80 == 0 {
			break
		}
	}
	if c.n < 2 || (c.hdr[c.n-1]&0x80 != 0 && c.n < len(c.hdr)) {
		return used, nil // the length is still to come
	}
	c.checked = true
	var size, mul int
	for _, x := range c.hdr[1:c.n] {
		size += int(x&0x7f) << mul
		mul += 7
	}
	if size > MaxConnectSize {
		c.tooLarge(b[used:])
		return used, fmt.Errorf("%w (%d bytes)", errConnectTooLarge, size)
	}
	if c.hdr[0] == 0x10 && c.hdr[c.n-1]&0x80 == 0 {
		c.size = size
		c.keeping = size > 0
		c.whole.Store(size == 0) // mochi cannot read an empty one
	}
	return used, nil // a malformed length or another packet first: mochi refuses it
}

// v5ConnectStart is how an MQTT 5 CONNECT's variable header begins: the
// protocol name MQTT and level 5.
var v5ConnectStart = []byte{0, 4, 'M', 'Q', 'T', 'T', 5}

// connackTooLarge is the MQTT 5 CONNACK 0x95 packet too large, without
// properties.
var connackTooLarge = []byte{0x20, 3, 0, 0x95, 0}

// tooLarge answers a CONNECT over MaxConnectSize whose first bytes after
// its fixed header (rest, as far as this read brought them) say MQTT 5
// with CONNACK 0x95 packet too large, the code MQTT 5 gives a packet over
// the server's limit: a final answer, where a connection closed without
// one looks like a network failure to retry. MQTT 3.1.1 has no such code
// and is closed without a CONNACK, as is a CONNECT whose level has not
// come yet (a client writes its CONNECT at once).
func (c *connectCapped) tooLarge(rest []byte) {
	if len(rest) < len(v5ConnectStart) || string(rest[:len(v5ConnectStart)]) != string(v5ConnectStart) || c.hdr[0] != 0x10 {
		return
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Conn.Write(connackTooLarge); err != nil {
		return
	}
	// The rest of the CONNECT is on its way: a socket closed with bytes
	// unread is reset, which can take the CONNACK with it before the
	// client reads it. So the write side is closed first, and what the
	// client still sends is read and dropped until it closes too (having
	// read the CONNACK), for at most a second and a MiB.
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 1<<20))
}
