package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// heldListener keeps Serve inside Accept after the listener is closed,
// until it is closed a second time: the moment a shutdown that closed the
// listener first meets a Serve that has not yet returned.
type heldListener struct {
	net.Listener
	accepting chan struct{}
	release   chan struct{}
	once      sync.Once
	mu        sync.Mutex
	closes    int
}

func (l *heldListener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closes++; l.closes == 2 {
		close(l.release)
	}
	return err
}

func (l *heldListener) Accept() (net.Conn, error) {
	l.once.Do(func() { close(l.accepting) })
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.release
	}
	return c, err
}

// Close closes the HTTP listener before the broker drains, then shuts the
// HTTP server down; when Serve had not yet returned, Shutdown closed the
// listener again and its "use of closed network connection" failed the
// shutdown, and chatd exited 1 with no request cut off.
func TestShuttingDownAnHTTPServerWhoseListenerIsClosedIsClean(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &heldListener{Listener: inner, accepting: make(chan struct{}), release: make(chan struct{})}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	<-ln.accepting
	_ = ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdownHTTP(ctx, "http", srv); err != nil {
		t.Fatalf("shutdown with no request running: %v", err)
	}
	<-served
}
