package broker

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/wsstream"
)

// WSListener is a mochi listener fed by an http.Handler, so MQTT over
// WebSocket shares chatd's HTTP server (and origin) with the API and the web
// page instead of taking a port of its own.
type WSListener struct {
	id       string
	origins  map[string]bool
	log      *slog.Logger
	upgrader websocket.Upgrader
	ended    func(net.Conn)   // once mochi is done with a connection (hooks.Chat.ConnectionEnded)
	clients  *sync.WaitGroup  // mochi's Listeners.ClientsWg: see TCPListener.clients
	pending  *pendingConnects // Broker.Shutdown cuts their wait for a CONNECT
	trusted  []netip.Prefix   // proxies whose X-Forwarded-For is believed (ClientAddr)
	// readLimit bounds one WebSocket message: a packet of the broker's
	// maximum size (wsMessageLimit).
	readLimit int64

	mu        sync.Mutex
	establish listeners.EstablishFn
	closed    bool
	done      chan struct{}
	// serving is closed once Serve has recorded establish: mochi starts
	// Serve on a goroutine of its own, and the HTTP server may pass on an
	// upgrade before that goroutine ran.
	serving chan struct{}
}

// NewWSListener returns a listener admitting same-origin browsers, the
// listed extra origins, and non-browser clients (no Origin header).
func NewWSListener(id string, allowed []string, log *slog.Logger) *WSListener {
	l := &WSListener{id: id, origins: map[string]bool{}, log: log, done: make(chan struct{}), serving: make(chan struct{}),
		readLimit: wsMessageLimit(MaxPacketSize(chat.DefaultLimits()))}
	for _, o := range allowed {
		if o = strings.TrimSpace(o); o != "" {
			l.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
		}
	}
	l.upgrader = websocket.Upgrader{
		Subprotocols:     []string{"mqtt"},
		HandshakeTimeout: 10 * time.Second,
		ReadBufferSize:   16 * 1024,
		WriteBufferSize:  16 * 1024,
		CheckOrigin:      l.checkOrigin,
	}
	return l
}

func (l *WSListener) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser: authenticated by its JWT like TCP clients
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return l.origins[strings.ToLower(strings.TrimRight(origin, "/"))]
}

// ID, Address, Protocol, Init, Serve and Close implement listeners.Listener.
func (l *WSListener) ID() string                  { return l.id }
func (l *WSListener) Address() string             { return "/mqtt" }
func (l *WSListener) Protocol() string            { return "ws" }
func (l *WSListener) Init(log *slog.Logger) error { return nil }

// Serve records the establish callback and blocks until Close.
func (l *WSListener) Serve(establish listeners.EstablishFn) {
	l.mu.Lock()
	if l.establish == nil {
		close(l.serving)
	}
	l.establish = establish
	l.mu.Unlock()
	<-l.done
}

// Close stops accepting upgrades; existing connections are closed by the
// broker's shutdown.
func (l *WSListener) Close(closeClients listeners.CloseFn) {
	l.mu.Lock()
	first := !l.closed
	if first {
		l.closed = true
		close(l.done)
	}
	l.mu.Unlock()
	if first { // see TCPListener.Close
		closeClients(l.id)
	}
}

// ServeHTTP upgrades to WebSocket (subprotocol "mqtt") and runs the MQTT
// connection on this request's goroutine until it ends.
func (l *WSListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select { // the broker is starting: wait for Serve rather than refuse
	case <-l.serving:
	case <-l.done:
	case <-r.Context().Done():
		return
	}
	l.mu.Lock()
	establish, closed := l.establish, l.closed
	if establish != nil && !closed && l.clients != nil {
		l.clients.Add(1) // see TCPListener.clients
		defer l.clients.Done()
	}
	l.mu.Unlock()
	if establish == nil || closed {
		// The node is shutting down: a second later a balancer sends the
		// client to another node.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "MQTT over WebSocket is not accepting connections", http.StatusServiceUnavailable)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this endpoint speaks MQTT over WebSocket (subprotocol mqtt)", http.StatusBadRequest)
		return
	}
	client, forwarded := ClientAddr(r, l.trusted)
	ip := client.Addr()
	if !forwarded {
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			ip = ap.Addr()
		}
	}
	// Counted from before the upgrade: over the cap, nothing is upgraded.
	key, err := l.pending.reserve(ip)
	if err != nil {
		if errors.Is(err, errTooManyPending) { // a flood: at debug, counted in chat_mqtt_connects_total
			l.log.Debug("websocket mqtt connection refused: too many connections from its address have not sent their CONNECT", "remote", ip.String())
			w.Header().Set("Retry-After", strconv.Itoa(int(ConnectTimeout/time.Second)))
			http.Error(w, "too many connections from this address have not sent their CONNECT", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Retry-After", "1") // shutting down, as above
		http.Error(w, "MQTT over WebSocket is not accepting connections", http.StatusServiceUnavailable)
		return
	}
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		l.pending.release(key)
		return // the upgrader already answered (403 for a foreign origin)
	}
	c.SetReadLimit(l.readLimit)
	// The CONNECT must arrive in time; mochi's keepalive deadline takes
	// over after it.
	_ = c.NetConn().SetReadDeadline(time.Now().Add(ConnectTimeout))
	var conn net.Conn = wsstream.New(c)
	if forwarded {
		conn = remoteConn{Conn: conn, remote: net.TCPAddrFromAddrPort(client)}
	}
	capped, ok := l.pending.track(conn, key)
	if !ok {
		_ = conn.Close()
		return
	}
	if err := establish(l.id, capped); err != nil {
		l.log.Debug("websocket mqtt connection ended", "err", err)
	}
	l.pending.forget(capped)
	if l.ended != nil {
		l.ended(capped)
	}
}
