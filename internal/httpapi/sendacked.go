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

// connOf is the connection kept in ctx; nil when none was.
func connOf(ctx context.Context) net.Conn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	return c
}
