package conncap

import (
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// addrConn is a connection that has a remote address and nothing else:
// the cap reads only that, and closes connections it refuses.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }
func (c *addrConn) Close() error         { return nil }

// connsListener hands out conns in turn, from many addresses.
type connsListener struct {
	net.Listener
	conns []net.Conn
	next  atomic.Int64
}

func (l *connsListener) Accept() (net.Conn, error) {
	return l.conns[int(l.next.Add(1))%len(l.conns)], nil
}

// BenchmarkHTTPCapLifecycle is what the cap adds to each HTTP connection,
// its accept and its state changes (new, one request, idle, closed),
// from 65,536 addresses at once on every core: its one mutex is taken
// four times per connection. Compare max=0 (no cap: nothing tracked) with
// max=256, and an accept refused at an address at the cap whose 256
// idle connections all have a request arriving (the longest scan: all of
// them, then refused). go test -run - -bench HTTPCap ./internal/conncap
func BenchmarkHTTPCapLifecycle(b *testing.B) {
	conns := make([]net.Conn, 1<<16)
	for i := range conns {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		conns[i] = &addrConn{remote: net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 4711))}
	}
	for _, max := range []int{0, 256} {
		b.Run("max="+map[int]string{0: "0", 256: "256"}[max], func(b *testing.B) {
			h := NewHTTP(max, nil, nil, nil)
			ln := h.Listener(&connsListener{conns: conns})
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, _ := ln.Accept()
					h.ConnState(c, http.StateNew)
					h.ConnState(c, http.StateActive)
					h.ConnState(c, http.StateIdle)
					h.ConnState(c, http.StateClosed)
				}
			})
		})
	}
	b.Run("max=256,full-of-arriving", func(b *testing.B) {
		h := NewHTTP(256, nil, nil, nil)
		t0 := time.Now()
		h.now = func() time.Time { return t0 } // every arrival within the grace
		full := conns[:64]
		for _, c := range full {
			for range 256 {
				rc, ok := h.admit(&addrConn{remote: c.RemoteAddr()})
				if !ok {
					b.Fatal("refused below the cap")
				}
				h.ConnState(rc, http.StateActive)
				h.ConnState(rc, http.StateIdle)
				rc.(*readConn).arrived.Store(t0.UnixNano())
			}
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := h.admit(full[0]); ok {
					b.Fatal("admitted over the cap")
				}
			}
		})
	})
}

// BenchmarkHTTPCapAcceptTCP is the same over real loopback TCP: dials
// from 4,096 addresses (127.1.x.y) to a listener whose accept loop counts
// each connection and closes it at once (new, then closed), max=0 against
// max=256: what the cap adds beside a kernel accept.
func BenchmarkHTTPCapAcceptTCP(b *testing.B) {
	for _, max := range []int{0, 256} {
		b.Run("max="+map[int]string{0: "0", 256: "256"}[max], func(b *testing.B) {
			raw, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			h := NewHTTP(max, nil, nil, nil)
			ln := h.Listener(raw)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					h.ConnState(c, http.StateNew)
					h.ConnState(c, http.StateClosed)
					_ = c.Close()
				}
			}()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) % 4096
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 1, byte(i>>8), byte(i))}}
					c, err := d.Dial("tcp", raw.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					_ = c.Close()
				}
			})
			_ = ln.Close()
			<-done
		})
	}
}
