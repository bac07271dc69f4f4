package tcpacked_test

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/tcpacked"
	"github.com/chatd/chatd/internal/testkit"
)

// wrapped is a connection wrapper that gives the connection it wraps by
// Unwrap, as the broker's do.
type wrapped struct{ net.Conn }

func (w wrapped) Unwrap() net.Conn { return w.Conn }

func TestWhatThePeerReadIsAcknowledgedThroughTheWrappersAndUnknownOffTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 1 << 20
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	for _, conn := range []net.Conn{c, wrapped{c}, tls.Client(wrapped{c}, &tls.Config{})} {
		testkit.WaitFor(t, 5*time.Second, "the peer's acknowledgement of what it read", func() bool {
			a, ok := tcpacked.Read(conn)
			return ok && a >= n
		})
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if a, ok := tcpacked.Read(p); ok {
		t.Fatalf("a pipe's acknowledged bytes are known: %d", a)
	}
	_ = c.Close()
	if a, ok := tcpacked.Read(c); ok {
		t.Fatalf("a closed connection's acknowledged bytes are known: %d", a)
	}
}
