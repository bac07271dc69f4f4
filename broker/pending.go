package broker

import (
	"net"
	"sync"
	"time"
)

// pendingConnects are the connections handed to mochi that have not sent
// a CONNECT yet (hooks.Chat's OnConnect settles the keepalive first thing,
// SetKeepalive, which ends a connection's wait here). Such a connection
// has no session to drain, so Shutdown cuts its wait for the CONNECT
// short: otherwise mochi's Server.Close waits for it until its
// ConnectTimeout, whatever the shutdown's budget.
type pendingConnects struct {
	mu    sync.Mutex
	conns map[*connectCapped]struct{}
	cut   bool
}

func newPendingConnects() *pendingConnects {
	return &pendingConnects{conns: map[*connectCapped]struct{}{}}
}

// track caps conn's CONNECT (connectCapped) for handing it to mochi,
// counting it until its CONNECT comes or it ends (forget); false once the
// shutdown cut the waits (then close conn). A nil p tracks nothing.
func (p *pendingConnects) track(conn net.Conn) (*connectCapped, bool) {
	c := &connectCapped{Conn: conn, pending: p}
	if p == nil {
		return c, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return nil, false
	}
	p.conns[c] = struct{}{}
	return c, true
}

// AwaitingConnect is how many connections the listeners handed on that
// have not sent their CONNECT yet.
func (b *Broker) AwaitingConnect() int {
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	return len(b.pending.conns)
}

// forget ends c's wait for its CONNECT.
func (p *pendingConnects) forget(c *connectCapped) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// cutAll ends the read of every connection still waiting for its CONNECT
// (mochi then ends the connection), and of every one tracked after.
func (p *pendingConnects) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Conn.SetReadDeadline(time.Now())
	}
}
