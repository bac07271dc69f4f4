package broker

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/conncap"
)

// pendingConnects are the connections handed to mochi that have not sent
// a CONNECT yet (hooks.Chat's OnConnect settles the keepalive first thing,
// SetKeepalive, which ends a connection's wait here). Such a connection
// has no session to drain, so Shutdown cuts its wait for the CONNECT
// short: otherwise mochi's Server.Close waits for it until its
// ConnectTimeout, whatever the shutdown's budget.
//
// They are also capped per client address (perIP.Max): every connect limit
// applies to a CONNECT, so without it one address could open connections
// that send nothing, each holding a file descriptor, mochi's goroutines
// and read buffer for the ConnectTimeout, and re-open them until the
// process runs out of descriptors, locking every other client out. A TCP
// connection counts from its accept, before mochi has it: while its PROXY
// protocol header is awaited, under its peer's address (reserve), then
// under the client's the header names (move).
type pendingConnects struct {
	mu    sync.Mutex
	conns map[*connectCapped]struct{}
	// perIP counts, by conncap.Key, the slots reserved, tracked or not
	// yet; its Max is how many connections one address (an IPv6 one: its
	// /64) may have waiting for their CONNECT at once, 0: no cap.
	perIP conncap.Counts
	cut   bool
	// refused, if set, counts a connection refused for perIP.Max.
	refused func()
	// unreadable, if set, counts a CONNECT mochi cannot decode
	// (connectCapped.unreadable).
	unreadable func()
}

// errShuttingDown and errTooManyPending are why reserve refuses a slot.
var (
	errShuttingDown   = errors.New("the broker is shutting down")
	errTooManyPending = errors.New("too many connections from this address have not sent their CONNECT yet")
)

func newPendingConnects(maxPerIP int, refused func()) *pendingConnects {
	return &pendingConnects{conns: map[*connectCapped]struct{}{}, perIP: conncap.NewCounts(maxPerIP), refused: refused}
}

// reserve counts a connection from a as waiting for its CONNECT, before it
// is handed to mochi (a WebSocket one: before its upgrade; one behind the
// PROXY protocol: before its header, under its peer's address, see move);
// the key it answers is given to track, or to release if the connection
// goes no further. errTooManyPending when a already has perIP.Max waiting
// (counted by refused), errShuttingDown once the shutdown cut the waits. A
// nil p reserves nothing.
func (p *pendingConnects) reserve(a netip.Addr) (netip.Prefix, error) {
	if p == nil {
		return netip.Prefix{}, nil
	}
	key := conncap.Key(a)
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		return netip.Prefix{}, errShuttingDown
	}
	err := p.admitLocked(key)
	p.mu.Unlock()
	if err != nil {
		p.countRefused()
		return netip.Prefix{}, err
	}
	return key, nil
}

// move counts the connection reserved under from (its TCP peer's key)
// under a's key instead, once its PROXY protocol header named the client
// a: a connection is counted from the moment it is accepted, while it
// waits for its header too, and then as the client's. The same key stays
// reserved; another is checked against perIP.Max as reserve does. On an
// error, from is released and nothing else is reserved.
func (p *pendingConnects) move(from netip.Prefix, a netip.Addr) (netip.Prefix, error) {
	if p == nil {
		return netip.Prefix{}, nil
	}
	to := conncap.Key(a)
	p.mu.Lock()
	if p.cut {
		p.releaseLocked(from)
		p.mu.Unlock()
		return netip.Prefix{}, errShuttingDown
	}
	if to == from {
		p.mu.Unlock()
		return from, nil
	}
	p.releaseLocked(from)
	err := p.admitLocked(to)
	p.mu.Unlock()
	if err != nil {
		p.countRefused()
		return netip.Prefix{}, err
	}
	return to, nil
}

// admitLocked counts one more connection under key, unless key already
// has perIP.Max (errTooManyPending). The zero key is not counted.
func (p *pendingConnects) admitLocked(key netip.Prefix) error {
	if !p.perIP.Admit(key) {
		return errTooManyPending
	}
	return nil
}

func (p *pendingConnects) countRefused() {
	if p.refused != nil {
		p.refused()
	}
}

// release ends a reservation that was not tracked.
func (p *pendingConnects) release(key netip.Prefix) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.releaseLocked(key)
	p.mu.Unlock()
}

func (p *pendingConnects) releaseLocked(key netip.Prefix) {
	p.perIP.Release(key)
}

// track caps conn's CONNECT (connectCapped) for handing it to mochi,
// counting it, under key (from reserve), until its CONNECT comes or it
// ends (forget); false once the shutdown cut the waits (then close conn:
// the reservation is released). A nil p tracks nothing.
func (p *pendingConnects) track(conn net.Conn, key netip.Prefix) (*connectCapped, bool) {
	c := &connectCapped{Conn: conn, pending: p, pendingKey: key}
	if p == nil {
		return c, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.releaseLocked(key)
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

// forget ends c's wait for its CONNECT (again: nothing).
func (p *pendingConnects) forget(c *connectCapped) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if _, ok := p.conns[c]; ok {
		delete(p.conns, c)
		p.releaseLocked(c.pendingKey)
	}
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
