package broker

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/chatd/chatd/internal/conncap"
)

// ConnectTimeout is how long a new connection may take to send its CONNECT
// (including a TLS handshake). mochi reads the CONNECT without a deadline,
// so a peer that never sends one would hold a goroutine, memory and a
// graceful shutdown forever. After CONNECT, mochi's keepalive deadline
// replaces this one.
const ConnectTimeout = 10 * time.Second

// TCPListener is mochi's TCP listener plus the CONNECT deadline.
type TCPListener struct {
	id, addr string
	tls      *tls.Config
	log      *slog.Logger
	wrap     func(net.Listener) net.Listener // under TLS: PROXY protocol
	ended    func(net.Conn)                  // once mochi is done with a connection (hooks.Chat.ConnectionEnded)
	// clients is mochi's Listeners.ClientsWg (nil: not counted). mochi
	// adds each connection it attaches to it, and Server.Close waits on
	// it: an Add from zero racing that Wait misuses the WaitGroup (the
	// race detector reports it when a client connects during shutdown).
	// So a connection is counted here first, under mu and only while the
	// listener is open: mochi's own Add then never starts from zero, and
	// none comes after Close.
	clients *sync.WaitGroup
	pending *pendingConnects // Broker.Shutdown cuts their wait for a CONNECT

	mu     sync.Mutex
	ln     net.Listener
	closed bool
}

// enter counts a connection about to be handed to mochi (see clients);
// false once the listener is closed.
func (l *TCPListener) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if l.clients != nil {
		l.clients.Add(1)
	}
	return true
}

// leave ends what enter counted.
func (l *TCPListener) leave() {
	if l.clients != nil {
		l.clients.Done()
	}
}

// NewTCPListener listens on addr (TLS when cfg is not nil) once Init runs.
func NewTCPListener(id, addr string, cfg *tls.Config, log *slog.Logger) *TCPListener {
	return &TCPListener{id: id, addr: addr, tls: cfg, log: log}
}

// ID, Address, Protocol, Init, Serve and Close implement listeners.Listener.
func (l *TCPListener) ID() string       { return l.id }
func (l *TCPListener) Protocol() string { return "tcp" }

// Address is the bound address (useful with port 0).
func (l *TCPListener) Address() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.addr
}

// Init binds the socket.
func (l *TCPListener) Init(*slog.Logger) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return err
	}
	if l.wrap != nil {
		ln = l.wrap(ln)
	}
	if l.tls != nil {
		ln = tls.NewListener(ln, l.tls)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = ln.Close()
		return errors.New("listener is closed")
	}
	l.ln = ln
	return nil
}

// Serve accepts connections until Close.
func (l *TCPListener) Serve(establish listeners.EstablishFn) {
	var backoff time.Duration
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors (EMFILE, ENFILE) or the like: wait
			// and accept again, as net/http's Serve does (5 ms doubling to
			// 1 s), so neither the loop nor the log spins while descriptors
			// are short, and connections are accepted again once some close.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.log.Warn("accept mqtt connection", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		_ = conn.SetReadDeadline(time.Now().Add(ConnectTimeout))
		go func() {
			// Counted from here, before mochi allocates anything for it,
			// and before its PROXY header (if any) is read, which a peer
			// can hold back until the deadline above as it can a CONNECT:
			// under the peer's address until the header names the client,
			// then under the client's.
			key, err := l.pending.reserve(conncap.RemoteIP(peer(conn)))
			if err != nil {
				l.refusePending(conn, peerAddr(conn), err)
				return
			}
			if err := proxyRefused(conn); err != nil {
				l.pending.release(key)
				l.log.Debug("mqtt connection refused: PROXY protocol", "peer", peerAddr(conn), "err", err)
				_ = conn.Close()
				return
			}
			if key, err = l.pending.move(key, conncap.RemoteIP(conn)); err != nil {
				l.refusePending(conn, conn.RemoteAddr().String(), err)
				return
			}
			if !l.enter() {
				l.pending.release(key)
				_ = conn.Close()
				return
			}
			capped, ok := l.pending.track(conn, key)
			if !ok {
				l.leave()
				_ = conn.Close()
				return
			}
			err = establish(l.id, capped)
			l.pending.forget(capped)
			l.leave()
			if err != nil {
				l.log.Debug("mqtt connection ended", "remote", conn.RemoteAddr().String(), "err", err)
			}
			if l.ended != nil {
				l.ended(capped)
			}
		}()
	}
}

// refusePending closes conn, which pendingConnects refused (reserve, move).
func (l *TCPListener) refusePending(conn net.Conn, remote string, err error) {
	if errors.Is(err, errTooManyPending) { // a flood: at debug, counted in chat_mqtt_connects_total
		l.log.Debug("mqtt connection refused: too many connections from its address have not sent their CONNECT", "remote", remote)
	}
	_ = conn.Close()
}

// Close stops accepting; connections are closed by the broker's shutdown.
// Only the first Close calls closeClients. Broker.Shutdown closes the
// listeners first (closing no clients), disconnects every client itself and
// only then calls mochi's Server.Close, which closes each listener again
// with mochi's closeListenerClients. That function (mochi v2.7.9) takes the
// clients read lock twice, nested; a disconnecting client's Delete queued
// between the two (a writer blocks new readers) deadlocks shutdown. Seen
// in CI; with nothing to close there, it is not called at all.
func (l *TCPListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	first := !l.closed
	if first {
		l.closed = true
		if l.ln != nil {
			_ = l.ln.Close()
		}
	}
	l.mu.Unlock()
	if first {
		closeClients(l.id)
	}
}
