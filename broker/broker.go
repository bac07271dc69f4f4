package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/hooks"
)

// Config of the broker.
type Config struct {
	MQTTAddr  string      // TCP listener, e.g. 127.0.0.1:1883 ("" = none)
	TLS       *tls.Config // optional, for the TCP listener
	MQTTSAddr string      // MQTT over TLS listener, e.g. 0.0.0.0:8883 ("" = none)
	MQTTSTLS  *tls.Config // its TLS configuration (required with MQTTSAddr)
	// WrapListener, if set, wraps the sockets of both TCP listeners
	// before TLS (ProxyProtocol).
	WrapListener   func(net.Listener) net.Listener
	SecureWS       bool     // also make a WebSocket listener for HTTPS (SecureWebSocket)
	AllowedOrigins []string // extra WebSocket origins besides same-origin, on every WebSocket listener
	// ForwardedTrusted are the HTTP proxies whose X-Forwarded-For names a
	// WebSocket client's address (ClientAddr).
	ForwardedTrusted []netip.Prefix
	// MaxPendingPerIP is how many connections one client address (an
	// IPv6 one: its /64) may hold open without having sent their CONNECT;
	// a new one over it is closed at once, before mochi reads anything
	// (WebSocket: answered 429 before the upgrade). 0: no cap.
	MaxPendingPerIP int
	Hook            *hooks.Chat
	// Limits size the largest packet accepted (MaxPacketSize).
	Limits chat.Limits
	// Hub is the node's delivery (delivery.Hub), stopped after the hook
	// drained and before the clients are disconnected.
	Hub    Closer
	Logger *slog.Logger
}

// Closer is what the broker asks of the delivery layer when it shuts down.
type Closer interface {
	Close(ctx context.Context) error
}

// Broker is the running MQTT side of chatd.
type Broker struct {
	cfg    Config
	Server *mqtt.Server
	tcp    *TCPListener
	ws     *WSListener
	tcps   *TCPListener // MQTT over TLS, nil without
	wss    *WSListener  // for the HTTPS server, nil without
	// pending are the connections of every listener waiting for their
	// CONNECT.
	pending *pendingConnects
}

// New builds the server and its listeners; Start begins serving.
func New(cfg Config) (*Broker, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := ServerOptions(cfg.Limits)
	opts.Logger = slog.New(quietHandler{cfg.Logger.Handler()}).With("component", "mqtt")
	srv := mqtt.New(opts)
	cfg.Hook.Attach(srv)
	if err := srv.AddHook(cfg.Hook, nil); err != nil {
		return nil, fmt.Errorf("add chat hook: %w", err)
	}
	b := &Broker{cfg: cfg, Server: srv, pending: newPendingConnects(cfg.MaxPendingPerIP, cfg.Hook.CountTooManyPending)}
	b.pending.unreadable = cfg.Hook.CountUnreadableConnect
	if cfg.MQTTAddr != "" {
		b.tcp = NewTCPListener("tcp", cfg.MQTTAddr, cfg.TLS, cfg.Logger.With("component", "mqtt"))
		b.tcp.wrap, b.tcp.ended, b.tcp.clients, b.tcp.pending = cfg.WrapListener, cfg.Hook.ConnectionEnded, &srv.Listeners.ClientsWg, b.pending
		if err := srv.AddListener(b.tcp); err != nil {
			return nil, fmt.Errorf("listen mqtt on %s: %w", cfg.MQTTAddr, err)
		}
	}
	if err := b.addSecure(); err != nil {
		return nil, err
	}
	b.ws = NewWSListener("ws", cfg.AllowedOrigins, cfg.Logger)
	b.ws.ended, b.ws.trusted, b.ws.clients, b.ws.pending = cfg.Hook.ConnectionEnded, cfg.ForwardedTrusted, &srv.Listeners.ClientsWg, b.pending
	b.ws.readLimit = wsMessageLimit(opts.Capabilities.MaximumPacketSize)
	if err := srv.AddListener(b.ws); err != nil {
		return nil, fmt.Errorf("add websocket listener: %w", err)
	}
	return b, nil
}

// Per-connection buffers. chatd writes its own packets straight to the
// socket (hooks.mqttConn), so mochi's write buffer only batches mochi's
// rare packets (CONNACK, SUBACK, PINGRESP) and is grown only when used;
// the read buffer, allocated with every connection, holds the fixed header
// and a small publish or two per system call (a chat message is ~200
// bytes on the wire), and a larger packet is read straight into its own
// slice, so 512 bytes cost no extra system call for it. Every KiB here is
// a KiB per connection.
const (
	ReadBufferSize  = 512
	WriteBufferSize = 2 * 1024
)

// WritesPending is mochi's outbound queue per client (a channel allocated
// with every client, 8 bytes a slot): only mochi's own routing uses it,
// and chatd routes nothing through mochi (delivery writes to the socket),
// so the queue stays empty; mochi's default is 8,192 slots, 64 KiB a
// client.
const WritesPending = 16

// PublishOverhead is what an MQTT PUBLISH holds besides its JSON
// payload: the fixed header, the topic, the packet id and the properties
// (an RPC's response topic and correlation data).
const PublishOverhead = 4 << 10

// MaxPacketSize is the largest MQTT packet chatd accepts, and announces
// in a v5 CONNACK: the largest request the body limit admits, however
// its JSON escapes the body (chat.Limits.MaxRequestBytes), plus a
// PUBLISH's own bytes. So MQTT refuses no send or RPC that HTTP accepts,
// and one over the body limit is answered too_large, not by closing the
// connection: 164 KiB (167,936 bytes) with the default 16 KiB body.
func MaxPacketSize(l chat.Limits) uint32 {
	return uint32(l.MaxRequestBytes() + PublishOverhead)
}

// wsMessageLimit is the largest WebSocket message a client may send: one
// packet of the maximum size (mochi counts the Remaining Length plus one
// byte; the length itself takes up to four more).
func wsMessageLimit(maxPacket uint32) int64 { return int64(maxPacket) + 4 }

// ServerOptions are the mochi options chatd's broker runs with, its
// largest packet sized for l; a benchmark's plain broker uses them too,
// to compare like with like.
func ServerOptions(l chat.Limits) *mqtt.Options {
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumQos = 1           // chat needs at-least-once, QoS2 adds round trips for nothing
	caps.RetainAvailable = 0      // chat never retains; state lives in PostgreSQL
	caps.WildcardSubAvailable = 1 // within the user's own tree only (ACL)
	caps.SharedSubAvailable = 0
	caps.SubIDAvailable = 0 // deliveries never carry subscription identifiers
	// mochi's default is 65,535 aliases per connection, each holding a
	// topic of up to a packet's size.
	caps.TopicAliasMaximum = hooks.TopicAliasMaximum
	caps.MaximumClientWritesPending = WritesPending
	caps.MaximumPacketSize = MaxPacketSize(l)
	caps.ReceiveMaximum = 256
	// MQTT 3.1.1 and 5 only (docs/protocol.md): mochi would serve 3.1
	// (MQIsdp) too, which nothing of chat's was made or tested for.
	caps.MinimumProtocolVersion = 4
	// mochi keeps an offline persistent client in memory until its session
	// expires; v3.1.1 sessions would otherwise never expire.
	caps.MaximumSessionExpiryInterval = uint32(hooks.MaxSessionExpiry / time.Second)
	return &mqtt.Options{
		Capabilities:             caps,
		InlineClient:             false,
		SysTopicResendInterval:   0,
		ClientNetWriteBufferSize: WriteBufferSize,
		ClientNetReadBufferSize:  ReadBufferSize,
	}
}

// Start serves the listeners (non-blocking).
func (b *Broker) Start() error {
	if err := b.Server.Serve(); err != nil {
		return fmt.Errorf("serve mqtt: %w", err)
	}
	return nil
}

// MQTTAddr is the bound TCP address (useful with port 0).
func (b *Broker) MQTTAddr() string {
	if b.tcp == nil {
		return ""
	}
	return b.tcp.Address()
}

// WebSocket returns the handler to mount at /mqtt.
func (b *Broker) WebSocket() *WSListener { return b.ws }

// Shutdown stops accepting, drains in-flight publishes (each commits and is
// acknowledged), stops delivery (flushing cursors) and disconnects clients.
func (b *Broker) Shutdown(ctx context.Context) error {
	if b.tcp != nil {
		b.tcp.Close(func(string) {})
	}
	b.closeSecure()
	b.ws.Close(func(string) {})
	// No listener hands on a connection any more: those still waiting
	// for their CONNECT end now rather than at their CONNECT deadline.
	b.pending.cutAll()
	drainErr := b.cfg.Hook.Drain(ctx)
	hubErr := b.cfg.Hub.Close(ctx)
	for _, cl := range b.Server.Clients.GetAll() {
		if !cl.Net.Inline {
			_ = b.Server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
	_ = b.Server.Close()
	// A WebSocket upgrade that was under way when its listener closed may
	// have attached since the pass above.
	for _, cl := range b.Server.Clients.GetAll() {
		if !cl.Net.Inline && !cl.Closed() {
			_ = b.Server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
	if drainErr != nil {
		return fmt.Errorf("drain publishes: %w", drainErr)
	}
	if hubErr != nil {
		return fmt.Errorf("stop delivery: %w", hubErr)
	}
	return nil
}
