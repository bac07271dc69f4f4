package server_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dialWeakLink connects to addr as a phone on a weak link does: a receive
// window of 32 KiB, segments of 1400 bytes. The connection closes at the
// end of the test.
func dialWeakLink(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<10),
				unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG, 1400))
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// pacedConn reads its first fast bytes at once, then at most per bytes in
// every tick for slowFor, then at once again: a link that slows down after
// a fast start and recovers. One goroutine reads.
type pacedConn struct {
	net.Conn
	fast, per     int
	tick, slowFor time.Duration

	slowSince, next time.Time // the slow stretch's start, the next tick's
	left            int       // bytes left to read in this tick
}

func (c *pacedConn) Read(p []byte) (int, error) {
	if c.fast > 0 {
		n, err := c.Conn.Read(p[:min(len(p), c.fast)])
		c.fast -= n
		return n, err
	}
	now := time.Now()
	if c.slowSince.IsZero() {
		c.slowSince, c.next = now, now
	}
	if now.Sub(c.slowSince) >= c.slowFor {
		return c.Conn.Read(p)
	}
	if c.left == 0 {
		<-time.After(time.Until(c.next))
		c.next = c.next.Add(c.tick)
		c.left = c.per
	}
	n, err := c.Conn.Read(p[:min(len(p), c.left)])
	c.left -= n
	return n, err
}
