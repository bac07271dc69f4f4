// Package tcpacked reads how many bytes a connection's peer has
// acknowledged (TCP_INFO's bytes_acked, Linux only): what a client took
// while a write to it blocks. Once a socket's send buffer is full, Linux
// wakes a blocked writer only when a third of that buffer (megabytes
// after a fast start) has drained, so a single write may wait minutes for
// a client that takes some KiB a second; what its TCP acknowledged
// meanwhile shows that it is taking them. The HTTP answers' write
// deadline (internal/httpapi) and the MQTT delivery watchdog
// (internal/delivery, through hooks) count it as progress.
package tcpacked

import "net"

// Read answers how many bytes the peer of c has acknowledged since the
// connection opened; false when that is unknown: c is not TCP beneath its
// wrappers (TLS, a WebSocket, PROXY protocol, the broker's: anything with
// a NetConn, Unwrap or Raw method is looked through), it is closed, or the
// system is not Linux.
func Read(c net.Conn) (uint64, bool) {
	for c != nil {
		switch u := c.(type) {
		case *net.TCPConn:
			return bytesAcked(u)
		case interface{ NetConn() net.Conn }: // *tls.Conn, a WebSocket
			c = u.NetConn()
		case interface{ Unwrap() net.Conn }: // the broker's CONNECT size limit
			c = u.Unwrap()
		case interface{ Raw() net.Conn }: // *proxyproto.Conn
			c = u.Raw()
		default:
			return 0, false
		}
	}
	return 0, false
}
