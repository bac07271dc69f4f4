package httpapi

import (
	"context"
	"net"
)

type connKey struct{}

// ConnContext is an http.Server's ConnContext: it keeps the connection in
// its requests' contexts, so that an answer's write deadline can follow
// what the client's TCP acknowledges (sendBody).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// ackedOf reads how many bytes the peer of the connection in ctx has
// acknowledged; nil when that is unknown (no connection kept, not TCP, or
// not Linux).
func ackedOf(ctx context.Context) func() (uint64, bool) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	for {
		u, ok := c.(interface{ NetConn() net.Conn }) // *tls.Conn
		if !ok {
			break
		}
		c = u.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	return bytesAcked(tc)
}
