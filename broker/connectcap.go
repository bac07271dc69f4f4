package broker

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
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
// than MaxConnectSize.
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
	timeout atomic.Int64     // 1.5 × keepalive (a time.Duration); 0 until SetKeepalive
	pending *pendingConnects // the connections waiting for their CONNECT, nil: not counted
}

// Unwrap returns the connection the listener accepted.
func (c *connectCapped) Unwrap() net.Conn { return c.Conn }

func (c *connectCapped) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.checked && n > 0 {
		if cerr := c.check(p[:n]); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}

// check reads the first packet's fixed header from what the connection
// gives, as it comes: a type byte, then the remaining length in one to
// four bytes of seven bits each.
func (c *connectCapped) check(b []byte) error {
	for _, x := range b {
		if c.n == len(c.hdr) {
			break
		}
		c.hdr[c.n] = x
		c.n++
		if c.n > 1 && x&0x80 == 0 {
			break
		}
	}
	if c.n < 2 || (c.hdr[c.n-1]&0x80 != 0 && c.n < len(c.hdr)) {
		return nil // the length is still to come
	}
	c.checked = true
	var size, mul int
	for _, x := range c.hdr[1:c.n] {
		size += int(x&0x7f) << mul
		mul += 7
	}
	if size > MaxConnectSize {
		return fmt.Errorf("%w (%d bytes)", errConnectTooLarge, size)
	}
	return nil // a malformed length or another packet first: mochi refuses it
}
