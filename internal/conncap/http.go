package conncap

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Why HTTP closes a connection of an address at its cap.
const (
	// ReasonTooManyPending: a new connection, closed as it was accepted
	// (nothing read, nothing answered) because its address held the most
	// connections that had sent no request yet, none of them idle.
	ReasonTooManyPending = "too_many_pending"
	// ReasonIdleOverCap: a keep-alive connection idle between two
	// requests, closed to make room for a newer connection of its address.
	ReasonIdleOverCap = "idle_over_cap"
)

// HTTP caps, per client address (Key), the connections of net/http
// servers that have not sent a request yet (new) or are idle between two
// (keep-alive): net/http bounds each only by its ReadHeaderTimeout or
// IdleTimeout, so one address opening connections that send nothing, or
// one trivial request each, could hold thousands at once and run the
// process out of descriptors, locking every client out. A connection
// serving a request is not counted: a long download must not keep the same
// user's other requests out, and a request has met the API's limits.
//
// When an address holds the cap, a connection of it that goes over (a new
// one, or one going idle after its answer) makes room by closing the
// address's longest idle connection: a server may close an idle keep-alive
// connection at any time (RFC 9112 §9.5; net/http does at IdleTimeout)
// and clients open another, whereas refusing a newer connection fails the
// request it was opened for, and a NAT's browsers would be refused while
// their own idle connections sat out IdleTimeout (120 s). An idle
// connection from which bytes have been read since it went idle is passed
// over: its client's next request is arriving (net/http reports it active
// only once the request's header is read whole), and closing it would
// lose that request; it still counts, and is passed over for
// arrivingGrace at most (a peer could otherwise keep its address's new
// connections out with a byte on each idle connection). Only when none
// of the address's counted connections is idle with nothing arriving is
// the newcomer closed: as it is accepted, before net/http sees it (no goroutine, no
// TLS handshake), or, going idle, itself (told first, with Connection:
// close in its answer, when Handler wraps the servers' handlers).
//
// Closed at accept, nothing answered: a 503 with Retry-After would need
// the request read, with a deadline and a goroutine per refused
// connection, and over TLS a handshake first (about 1 ms of CPU with an
// ECDSA P-256 key, 2 to 3 ms with RSA 2048, against about 1 µs to count
// and close one): an attacker opening connections as fast as it can would
// turn the cap into the very cost it saves. It refuses only while an
// address holds the cap's number of connections that have sent no whole
// request, none idle to close, which honest clients (their request
// follows their handshake within a round trip) reach only in a burst of
// hundreds of connects within one round trip; behind a proxy, whose
// connections are not counted, never.
//
// The HTTP listeners read no PROXY protocol header (a balancer sending
// one gets 400 Bad Request for it) and a connection's X-Forwarded-For
// comes with its first request, not read yet, so it is counted under its
// TCP peer. The
// trusted proxies' connections are not counted at all: an HTTP proxy
// (X-Forwarded-For) opens a connection to forward a request it has read
// and keeps a pool of idle ones, and a TCP load balancer brings every
// client's connections from its own address, so counting them would cap
// the whole node's traffic at one address's share and let one client's
// silent connections lock everyone out. Silent clients behind them are
// the proxy's to bound.
//
// Wrap the servers' listeners with Listener and their handlers with
// Handler, and set their ConnState to ConnState and their ConnContext to
// one calling ConnContext; servers may share one HTTP. Safe for concurrent use.
type HTTP struct {
	trusted []netip.Prefix
	closed  func(reason string)
	log     *slog.Logger
	now     func() time.Time

	mu     sync.Mutex
	counts Counts
	conns  map[*readConn]*httpConn
	idle   map[netip.Prefix][]*httpConn // of a key, longest idle first
}

type httpConn struct {
	conn    *readConn
	key     netip.Prefix
	counted bool // new or idle, counted under key
	idle    bool // in idle[key]
}

// readConn is an accepted connection as the cap hands it on (beneath TLS),
// noting whether bytes have been read from it since it went idle: net/http
// reports a connection active only once its request's header is read
// whole, so until then a request arriving on an idle connection (its
// client reusing it, the usual case) looks idle, and closing it to make
// room would lose that request. Bytes are read as they arrive (net/http,
// or TLS beneath it, is blocked reading an idle connection), so one that
// has received any is left alone for a while (closableLocked); what is
// still on the wire cannot be known.
type readConn struct {
	net.Conn
	now func() time.Time
	// arrived is when bytes were first read since the connection went
	// idle (Unix nanoseconds), 0 if none have been.
	arrived atomic.Int64
}

func (c *readConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.arrived.Load() == 0 {
		c.arrived.CompareAndSwap(0, c.now().UnixNano())
	}
	return n, err
}

// NetConn is the accepted connection, for those looking beneath wrappers
// (internal/tcpacked).
func (c *readConn) NetConn() net.Conn { return c.Conn }

// ReadFrom keeps net/http's sendfile for files served (it asks the
// connection for io.ReaderFrom).
func (c *readConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite keeps net/http's half-close before it closes a connection
// whose request it refused unread.
func (c *readConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// own is the readConn net/http's connection c is, or wraps (a *tls.Conn);
// nil for one the cap did not accept (a trusted proxy's, or with no cap).
func own(c net.Conn) *readConn {
	if rc, ok := c.(*readConn); ok {
		return rc
	}
	if tc, ok := c.(*tls.Conn); ok {
		rc, _ := tc.NetConn().(*readConn)
		return rc
	}
	return nil
}

// NewHTTP caps at max the connections per address that are new or idle
// (0: no cap, nothing is tracked), leaving out peers in trusted. closed,
// if set, is told each connection closed for the cap and why
// (ReasonTooManyPending, ReasonIdleOverCap); log gets one debug line each.
func NewHTTP(max int, trusted []netip.Prefix, closed func(reason string), log *slog.Logger) *HTTP {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HTTP{trusted: trusted, closed: closed, log: log, now: time.Now, counts: NewCounts(max),
		conns: map[*readConn]*httpConn{}, idle: map[netip.Prefix][]*httpConn{}}
}

// Listener wraps ln: a connection over the cap is closed as it is
// accepted and Accept goes on to the next. It hands on the connection
// wrapped, to see bytes arrive (readConn); net/http serves TLS only on a
// *tls.Conn, so wrap it inside tls.NewListener: ConnState, ConnContext and
// Handler find it beneath the *tls.Conn. Closed at accept, a connection
// costs no handshake either way (tls.NewListener hands on a connection
// without one).
func (h *HTTP) Listener(ln net.Listener) net.Listener {
	if h == nil || h.counts.Max <= 0 {
		return ln
	}
	return &capListener{Listener: ln, h: h}
}

type capListener struct {
	net.Listener
	h *HTTP
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if rc, ok := l.h.admit(c); ok {
			return rc, nil
		}
		_ = c.Close()
	}
}

// admit counts c, new, under its peer's key, and returns what to hand
// on; false: close it.
func (h *HTTP) admit(c net.Conn) (net.Conn, bool) {
	ip := RemoteIP(c)
	key := Key(ip)
	if !key.IsValid() || h.isTrusted(ip) {
		return c, true
	}
	rc := &readConn{Conn: c, now: h.now}
	hc := &httpConn{conn: rc, key: key, counted: true}
	h.mu.Lock()
	room, ok := h.makeRoomLocked(key)
	if !ok {
		h.mu.Unlock()
		h.report(ReasonTooManyPending, ip)
		return nil, false
	}
	h.conns[rc] = hc
	h.mu.Unlock()
	h.closeIdle(room)
	return rc, true
}

// makeRoomLocked counts one more connection under key: at the cap, by
// closing (once the lock is released: closeIdle) the key's longest idle
// connection on which nothing has arrived; false when the key has none.
func (h *HTTP) makeRoomLocked(key netip.Prefix) (*httpConn, bool) {
	if h.counts.Admit(key) {
		return nil, true
	}
	old := h.closableLocked(key)
	if old == nil {
		return nil, false
	}
	h.forgetLocked(old)
	h.counts.Admit(key) // the slot old held
	return old, true
}

// arrivingGrace is how long an idle connection on which a next request
// began to arrive is passed over as room is made (closableLocked): the
// servers' ReadHeaderTimeout, which bounds a new connection's wait for
// its request alike. An honest client sends a request's header at once;
// a peer sending one to three bytes on its idle connections, and no
// more, would otherwise keep them unclosable for net/http's IdleTimeout
// (120 s: net/http waits for four bytes under it before its header
// timeout starts), and its address's new connections refused meanwhile.
const arrivingGrace = 10 * time.Second

// closableLocked is key's longest idle connection on which no request is
// arriving: nothing read from it since it went idle, or its first bytes
// read longer than arrivingGrace ago. Nil if none.
func (h *HTTP) closableLocked(key netip.Prefix) *httpConn {
	stale := h.now().Add(-arrivingGrace).UnixNano()
	for _, hc := range h.idle[key] {
		if a := hc.conn.arrived.Load(); a == 0 || a <= stale {
			return hc
		}
	}
	return nil
}

func (h *HTTP) closeIdle(old *httpConn) {
	if old == nil {
		return
	}
	h.report(ReasonIdleOverCap, RemoteIP(old.conn)) // counted before the peer can see it closed
	closeNow(old.conn)
}

// closeNow closes an idle connection without a TLS close_notify: that
// alert is written with a 5 s deadline, and a peer that leaves its
// answer unread could hold the goroutine closing it that long, the
// accept loop among them. Its serve goroutine's read ends with the
// socket.
func closeNow(c net.Conn) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	_ = c.Close()
}

// ConnState is the servers' http.Server.ConnState: a connection stops
// counting when a request arrives on it (StateActive), counts again when
// it goes idle after its answer (over the cap: as a new one would), and is
// forgotten when it ends or is hijacked (a WebSocket upgrade: the broker
// counts it then, until its CONNECT).
func (h *HTTP) ConnState(c net.Conn, state http.ConnState) {
	if h == nil || h.counts.Max <= 0 {
		return
	}
	rc := own(c)
	if rc == nil {
		return
	}
	switch state {
	case http.StateActive:
		h.mu.Lock()
		if hc := h.conns[rc]; hc != nil && hc.counted {
			h.uncountLocked(hc)
		}
		h.mu.Unlock()
	case http.StateIdle:
		h.mu.Lock()
		hc := h.conns[rc]
		if hc == nil || hc.counted {
			h.mu.Unlock()
			return
		}
		room, ok := h.makeRoomLocked(hc.key)
		if !ok {
			delete(h.conns, rc)
			h.mu.Unlock()
			h.report(ReasonIdleOverCap, RemoteIP(c))
			// Its answer is written; nothing more is read from it.
			closeNow(rc)
			return
		}
		// Called by its serving goroutine before it reads again: what is
		// read from here on is its next request.
		rc.arrived.Store(0)
		hc.counted, hc.idle = true, true
		h.idle[hc.key] = append(h.idle[hc.key], hc)
		h.mu.Unlock()
		h.closeIdle(room)
	case http.StateHijacked, http.StateClosed:
		h.mu.Lock()
		if hc := h.conns[rc]; hc != nil {
			h.forgetLocked(hc)
		}
		h.mu.Unlock()
	}
}

// connKey is the context key of the connection a request came on
// (ConnContext).
type connKey struct{}

// ConnContext is the servers' http.Server.ConnContext: it keeps the
// connection in its requests' context, for Handler.
func (h *HTTP) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if h == nil || h.counts.Max <= 0 {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, c)
}

// Handler tells the client of an answer whose connection would be closed
// as it goes idle (its address at the cap, none of its connections idle
// to close instead: see ConnState) with Connection: close in the answer,
// so net/http closes it after the answer and the client does not send
// its next request on it. Closed only as it went idle, it was the very
// connection a client reuses first (the one it used last), and the next
// request sent on it was lost: a POST without Idempotency-Key is not
// resent by Go's Transport. Decided as the answer's header is written
// (or as its handler returns, having written nothing);
// one whose address fills after that is still closed as it goes idle.
func (h *HTTP) Handler(next http.Handler) http.Handler {
	if h == nil || h.counts.Max <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(net.Conn)
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		cw := &closingWriter{ResponseWriter: w, h: h, c: c}
		next.ServeHTTP(cw, r)
		// A handler that wrote nothing is answered by net/http once it
		// returns (200, empty): its header is still to be written.
		cw.decide()
	})
}

// closeAfter reports whether c, serving a request, would be closed as it
// goes idle (so: it is told to close after its answer, and counted as
// closed for the cap).
func (h *HTTP) closeAfter(c net.Conn) bool {
	rc := own(c)
	if rc == nil {
		return false
	}
	h.mu.Lock()
	hc := h.conns[rc]
	full := hc != nil && !hc.counted && h.counts.Of(hc.key) >= h.counts.Max && h.closableLocked(hc.key) == nil
	if full {
		h.forgetLocked(hc) // it will not go idle: closed after its answer
	}
	h.mu.Unlock()
	if full {
		h.report(ReasonIdleOverCap, RemoteIP(c))
	}
	return full
}

// closingWriter asks closeAfter as the answer's header is written. It
// passes Flush, Hijack and Unwrap through (the WebSocket upgrader asserts
// http.Hijacker directly).
type closingWriter struct {
	http.ResponseWriter
	h       *HTTP
	c       net.Conn
	decided bool
}

func (w *closingWriter) decide() {
	if w.decided {
		return
	}
	w.decided = true
	if w.h.closeAfter(w.c) {
		w.Header().Set("Connection", "close")
	}
}

func (w *closingWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.decide()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closingWriter) Write(b []byte) (int, error) {
	w.decide()
	return w.ResponseWriter.Write(b)
}

func (w *closingWriter) Flush() {
	w.decide()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *closingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.decided = true // an upgrade: the broker counts it from here
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("http: response does not support hijacking")
	}
	return h.Hijack()
}

func (w *closingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// uncountLocked stops counting hc (still tracked).
func (h *HTTP) uncountLocked(hc *httpConn) {
	if hc.idle {
		idle := h.idle[hc.key]
		if i := slices.Index(idle, hc); i >= 0 {
			idle = slices.Delete(idle, i, i+1)
		}
		if len(idle) == 0 {
			delete(h.idle, hc.key)
		} else {
			h.idle[hc.key] = idle
		}
	}
	h.counts.Release(hc.key)
	hc.counted, hc.idle = false, false
}

// forgetLocked stops tracking hc.
func (h *HTTP) forgetLocked(hc *httpConn) {
	if hc.counted {
		h.uncountLocked(hc)
	}
	delete(h.conns, hc.conn)
}

func (h *HTTP) isTrusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range h.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// report counts and logs (at debug: a flood must not flood the log) a
// connection closed for the cap.
func (h *HTTP) report(reason string, ip netip.Addr) {
	if h.closed != nil {
		h.closed(reason)
	}
	if reason == ReasonTooManyPending {
		h.log.Debug("http connection refused: too many connections from its address have sent no request yet", "remote", ip.String(), "max", h.counts.Max)
		return
	}
	h.log.Debug("idle http connection closed: its address holds the most connections that are new or idle", "remote", ip.String(), "max", h.counts.Max)
}

// Conns are ip's key's connections: counted (new or idle), and tracked
// (counted, or serving a request).
func (h *HTTP) Conns(ip netip.Addr) (counted, tracked int) {
	key := Key(ip)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hc := range h.conns {
		if hc.key == key {
			tracked++
		}
	}
	return h.counts.Of(key), tracked
}

// Arriving is how many of ip's key's idle connections have had bytes
// arrive since they went idle (a request on its way in): they are not
// closed to make room.
func (h *HTTP) Arriving(ip netip.Addr) int {
	key := Key(ip)
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, hc := range h.idle[key] {
		if hc.conn.arrived.Load() != 0 {
			n++
		}
	}
	return n
}
