package hooks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/tracing"
)

// Config wires the hook to the domain.
type Config struct {
	Service  *chat.Service
	Sessions chat.SessionStore
	Hub      chat.Delivery
	// Verify turns a CONNECT password (a JWT) into a user id, says when
	// the token was issued (its iat, zero when it has none: revocation
	// refuses by it, tokenrevoke.go) and until when it is accepted: the
	// connection ends then (tokenexpiry.go).
	Verify func(token string) (user int64, issuedAt, until time.Time, err error)
	// PeerUser, if set, names the user of a connection authenticated by
	// its transport (a verified TLS client certificate): presented is
	// false when the connection carries no such identity, and the JWT
	// decides. issuedAt is when that identity was issued (the
	// certificate's NotBefore): the user's revocation refuses it as it
	// refuses their tokens. until is when it expires (zero: never); the
	// connection ends then. An err wrapping chat.ErrTokenRevoked (a
	// certificate its CA revoked, or whose CA was removed) is refused as a
	// revoked credential; PeersChanged asks again about the connections it
	// admitted, and tells their clients the err's ClientReason() string
	// if it has that method.
	PeerUser func(conn net.Conn) (user int64, issuedAt, until time.Time, presented bool, err error)
	// RPC answers chat/v1/rpc/{method} requests with reply JSON.
	RPC func(ctx context.Context, userID int64, method string, payload []byte) []byte
	// SendTimeout bounds one publish's database work (default 5s).
	SendTimeout time.Duration
	// RPCWorkers and RPCQueue size the pool that runs RPC requests
	// (default 8 and 256); a request that finds the queue full, or an
	// eighth of it (at least 4) taken by its user's requests, is refused
	// (PUBACK 0x97, reply 503). Users take turns, each on at most half of
	// the workers, and the last idle worker is kept for a user with none
	// running (rpcpool.go).
	RPCWorkers, RPCQueue int
	// MaxSubscriptions per client (default 16).
	MaxSubscriptions int
	// Presence is told when sessions start and end (nil: no presence).
	Presence Presence
	Logger   *slog.Logger
	Metrics  *Metrics
	// ConnectBudget paces CONNECT handling node-wide (admission.go).
	ConnectBudget ConnectBudget
	// MaxConnectionsPerUser caps the client ids a user may have connected
	// at once (conncap.go); 0: no cap.
	MaxConnectionsPerUser int
	// SharedConns, when set, counts connections across nodes for the cap;
	// NodeID names this node there.
	SharedConns SharedConns
	NodeID      string
	// Tracer traces the publishes of stream changes and RPC requests
	// (nil: tracing off).
	Tracer *tracing.Tracer
}

// Presence tracks connected sessions (presence.Tracker). Both calls must
// not block.
type Presence interface {
	// Connected: token is the session's, as Sessions.Open was given it.
	Connected(clientID, token string, userID int64)
	Disconnected(clientID string, userID int64)
}

// Chat is the mochi hook of the chat server.
type Chat struct {
	mqtt.HookBase
	cfg    Config
	server *mqtt.Server

	clients clientIndex
	// connecting holds the clients OnConnect accepted whose session is
	// not established yet, by their connection (ConnectionEnded).
	connecting sync.Map // net.Conn -> *mqtt.Client
	// ending holds, by connection, the end of the connect turn that a
	// connection's clean-up by mochi runs in (cleanUpInTurn).
	ending sync.Map // net.Conn -> func()

	busy     atomic.Int64 // publishes being processed
	draining atomic.Bool
	rpc      *rpcPool

	budget *pacer // nil: CONNECTs unpaced
	conns  userConns
	gate   connectGate // a client id's CONNECTs, one at a time (connectorder.go)

	// tokenPrefix and connSeq make each connection's session token
	// (newToken).
	tokenPrefix string
	connSeq     atomic.Uint64

	revoked revocations // token revocations announced lately (tokenrevoke.go)
	notices takeoverNotices
}

type clientInfo struct {
	userID      int64
	persistent  bool
	established atomic.Bool // OnSessionEstablished ran (counted online)
	conn        *mqttConn
	acks        *ackQueue
	qos0        *flightLimit // QoS 0 publishes in flight
	present     atomic.Bool  // counted by Presence
	session     sessionState
	token       string // this connection's claim on its session (newToken)
	// authUntil is when the connection's credentials stop being accepted
	// (zero: never), authEnd the timer that ends it then; both used on
	// the connection's own goroutine only (tokenexpiry.go).
	authUntil time.Time
	authEnd   *time.Timer
	// byToken: authenticated by a JWT (else a client certificate);
	// issuedAt is when its credential was issued (the JWT's iat, zero
	// when it has none; the certificate's NotBefore): a revocation of the
	// user's credentials issued before then ends the connection
	// (tokenrevoke.go).
	byToken  bool
	issuedAt time.Time
	// checked is when CONNECT began reading the user's revocation
	// (CheckToken).
	checked time.Time
	// revoking counts this connection's tokens.revoke requests under way:
	// the connection ends after their answers (endAfterRevoking), not at
	// the announcement, which may come first.
	revoking atomic.Int32
	// connected ends the connection's turn among the CONNECTs of its
	// client id (connectGate) once mochi listed it and wrote its CONNACK
	// (OnSessionEstablished), or when it ends before.
	connected func()
	// connacked: its CONNACK was written (OnSessionEstablished began). A
	// takeover notice closes a connection at once only then: mochi lists
	// it before writing the CONNACK, and a DISCONNECT must not come first.
	connacked atomic.Bool
}

// New returns the hook; call Attach with the server before serving.
func New(cfg Config) *Chat {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 5 * time.Second
	}
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.RPCWorkers <= 0 {
		cfg.RPCWorkers = 8
	}
	if cfg.RPCQueue <= 0 {
		cfg.RPCQueue = 256
	}
	return &Chat{cfg: cfg, rpc: newRPCPool(cfg.RPCWorkers, cfg.RPCQueue), budget: newPacer(cfg.ConnectBudget),
		tokenPrefix: cfg.NodeID + "/" + strconv.FormatUint(rand.Uint64(), 36) + "/"}
}

// newToken names a new connection for its session (Sessions.Open): only
// the connection that opened a session last may end it or start its
// expiry clock, so the end of an older connection of the same client id
// (on another node, which is not told of the reconnect, or here, racing
// mochi's takeover) leaves the session alone. The node id and a random
// per-process part keep tokens apart across nodes and restarts (a
// configured node id is the same after a restart), the counter within the
// process.
func (h *Chat) newToken() string {
	return h.tokenPrefix + strconv.FormatUint(h.connSeq.Add(1), 36)
}

// SessionTakenOver closes this node's connection token of clientID, whose
// session a connection on another node took over (store.WatchTakeovers):
// the server must close the existing connection of a client id that
// connects again (MQTT-3.1.4-3), with DISCONNECT 0x8E on MQTT 5 as mochi
// does for a takeover on one node. Any other token (a connection that
// already ended, or one of another process) is not this node's to close.
// It does not block: the DISCONNECT is written on a goroutine of its own,
// since a half-open socket can hold a write until its deadline; one that
// holds it past TakeoverGrace is closed without it (takeover.go).
//
// The notice can come before the connection it names has its CONNACK:
// the session's open commits before the connection's takeover on this
// node, its listing by mochi and its CONNACK, and the open of another
// node's connection may commit and be announced meanwhile. Such a token
// is remembered (takeoverNotices), and the connection is closed once it
// has its CONNACK (OnSessionEstablished): a DISCONNECT written before it
// would be the first packet the client got [MQTT-3.2.0-1].
func (h *Chat) SessionTakenOver(clientID, token string) {
	if !strings.HasPrefix(token, h.tokenPrefix) {
		return
	}
	if cl, ok := h.notices.listedOrNoted(h, clientID, token); ok {
		h.closeTakenOver(cl)
	}
}

// Attach gives the hook the server it runs in (for CONNACKs and lookups).
func (h *Chat) Attach(s *mqtt.Server) { h.server = s }

// ID names the hook.
func (h *Chat) ID() string { return "chat" }

// Provides lists the hook points used.
func (h *Chat) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnAuthPacket, mqtt.OnACLCheck, mqtt.OnSessionEstablished,
		mqtt.OnSubscribe, mqtt.OnSubscribed, mqtt.OnUnsubscribe, mqtt.OnUnsubscribed, mqtt.OnPublish, mqtt.OnPacketRead, mqtt.OnPacketEncode, mqtt.OnDisconnect,
	}, []byte{b})
}

func (h *Chat) info(cl *mqtt.Client) *clientInfo {
	ci, _ := h.clients.Load(cl)
	return ci
}

// UserOf returns the authenticated user of a client.
func (h *Chat) UserOf(cl *mqtt.Client) (int64, bool) {
	if ci := h.info(cl); ci != nil {
		return ci.userID, true
	}
	return 0, false
}

func isV5(cl *mqtt.Client) bool { return cl.Properties.ProtocolVersion == 5 }

// remoteIP is the address part of a remote "host:port" (the whole string
// when it has no port), the key of the connect rate limit.
func remoteIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// persistentSession: v5 session expiry > 0, v3.1.1 clean session = 0.
// The expiry is capped at MaxSessionExpiry (capped: the client asked for
// more); a v3.1.1 persistent session, which has no expiry of its own, gets
// the cap.
func persistentSession(cl *mqtt.Client) (persistent bool, expiry time.Duration, capped bool) {
	if isV5(cl) {
		exp := time.Duration(cl.Properties.Props.SessionExpiryInterval) * time.Second
		return exp > 0, min(exp, MaxSessionExpiry), exp > MaxSessionExpiry
	}
	return !cl.Properties.Clean, MaxSessionExpiry, false
}

// MaxKeepalive is the longest keepalive (seconds) the server accepts.
const MaxKeepalive = 600

// keepaliveConn is a connection that times out after exactly 1.5 × the
// keepalive it is told, where mochi's deadline, in whole seconds, is half
// a second short for an odd keepalive. The broker's listeners give mochi
// such connections.
type keepaliveConn interface{ SetKeepalive(time.Duration) }

// MaxClientIDLength bounds a client id (bytes): it is the session's key in
// PostgreSQL, whose index refuses keys of a few KiB, and is in every log
// line of the connection. A longer one is refused as an invalid identifier
// (v5 0x85, 3.1.1 0x02), a final answer, before anything else is spent on
// it.
const MaxClientIDLength = 256

// clientIDTakenCode is the CONNACK for a client id another user holds:
// the client identifier is valid but not allowed by the server, v5 0x85,
// 3.1.1 0x02 identifier rejected. The token is good: "bad user name or
// password" would send a device for a new token, refused the same way,
// again and again.
func clientIDTakenCode(cl *mqtt.Client) packets.Code {
	if isV5(cl) {
		return packets.Code{Code: packets.ErrClientIdentifierNotValid.Code, Reason: clientIDTakenReason}
	}
	return packets.Err3ClientIdentifierNotValid
}

// clientIDTakenReason is the reason string of clientIDTakenCode.
const clientIDTakenReason = "client identifier not valid: another user's session holds this client id; connect with one of this device's own"

// MaxSessionExpiry bounds how long an offline persistent session (its
// cursors and subscriptions, in PostgreSQL) is kept.
const MaxSessionExpiry = 7 * 24 * time.Hour

// refuse answers the CONNECT with code and returns it, which ends the
// connection; why labels the metric and the log line.
func (h *Chat) refuse(cl *mqtt.Client, code packets.Code, why connectOutcome, user int64) error {
	return h.refuseWith(cl, code, why, user, nil)
}

// refuseRate refuses a connect over a connection rate limit or the node's
// budget (err says which, why labels it): v5 CONNACK 0x9F with when to
// retry in the user property retryAfter, as a refused publish says it,
// 3.1.1 0x03.
func (h *Chat) refuseRate(cl *mqtt.Client, err error, why connectOutcome, user int64) error {
	var props *packets.Properties
	if s := retryAfter(err); s > 0 && isV5(cl) {
		props = &packets.Properties{User: []packets.UserProperty{{Key: "retryAfter", Val: strconv.FormatInt(s, 10)}}}
	}
	return h.refuseWith(cl, busyCode(cl), why, user, props)
}

// CountTooManyPending counts a connection the broker closed before mochi
// read anything from it, its client address holding the most connections
// that have not sent their CONNECT (broker.Config.MaxPendingPerIP), as
// chat_mqtt_connects_total{outcome="too_many_pending"}. Not logged here: a
// flood must not flood the log. Safe for concurrent use.
func (h *Chat) CountTooManyPending() {
	h.cfg.Metrics.Connects.WithLabelValues(string(connectTooManyPending)).Inc()
}

// CountUnreadableConnect counts a CONNECT the broker read whole that
// mochi cannot decode, and so closes before any hook (v5: after the
// broker's CONNACK 0x81), as chat_mqtt_connects_total{outcome="malformed"}.
// Not logged here: anyone can send them as fast as the network takes
// them. Safe for concurrent use.
func (h *Chat) CountUnreadableConnect() {
	h.cfg.Metrics.Connects.WithLabelValues(string(connectMalformed)).Inc()
}

// refuseWith is refuse with props (nil: none) on the CONNACK.
func (h *Chat) refuseWith(cl *mqtt.Client, code packets.Code, why connectOutcome, user int64, props *packets.Properties) error {
	h.cfg.Metrics.Connects.WithLabelValues(string(why)).Inc()
	level := slog.LevelInfo
	if quietRefusal(why) {
		level = slog.LevelDebug
	}
	h.cfg.Logger.Log(context.Background(), level, "connection refused", "client", truncatedID(cl.ID), "remote", cl.Net.Remote, "reason", why, "user", user)
	_ = h.server.SendConnack(cl, code, false, props)
	return code
}

// OnConnect limits connection attempts per IP address, waits for its turn
// in the node's connect budget, authenticates the JWT in the password,
// refuses an Authentication Method (auth.go) and Wills, limits the user's
// connects and connections, enforces client-id ownership and opens (or
// resumes) the durable chat session, all before mochi takes over any
// existing session with that client id (the CONNECTs of one client id
// take turns from the open to that takeover: connectorder.go). The per-IP
// limit comes first, so a flood from one address costs neither a turn of
// the budget others need nor a signature check nor a query.
func (h *Chat) OnConnect(cl *mqtt.Client, pk packets.Packet) error {
	// Keepalive 0 (never time out) or hours would let dead connections
	// hold sessions forever; the server's limit is announced to v5 clients
	// (Server Keep Alive) and enforced for all.
	if ka := cl.State.Keepalive; ka == 0 || ka > MaxKeepalive {
		cl.State.Keepalive = MaxKeepalive
		cl.State.ServerKeepalive = true
	}
	if c, ok := cl.Net.Conn.(keepaliveConn); ok {
		c.SetKeepalive(time.Duration(cl.State.Keepalive) * time.Second)
	}
	if err := h.cfg.Service.CheckRate(context.Background(), chat.RateConnect, clientIP(cl)); err != nil {
		return h.refuseRate(cl, err, connectRateLimited, 0)
	}
	if len(cl.ID) > MaxClientIDLength {
		return h.refuse(cl, packets.ErrClientIdentifierNotValid, connectClientIDInvalid, 0)
	}
	if code, ok := refuseAuthMethod(cl); ok {
		return h.refuse(cl, code, connectAuthMethod, 0)
	}
	if retry, ok := h.awaitTurn(isV5(cl)); !ok {
		return h.refuseRate(cl, &chat.Error{Code: chat.CodeRateLimited, Message: "the node's connect budget is full",
			RateLimit: &chat.RateLimitInfo{Kind: "connect_budget", RetryAfter: retry}}, connectBusy, 0)
	}
	cred, err := h.authenticate(cl, pk)
	if chat.ErrorCode(err) == chat.CodeUnavailable {
		// The identity provider's keys could not be checked: no verdict
		// on the token, so a client that cannot renew it tries again,
		// told (v5) when the key set may be fetched again.
		var props *packets.Properties
		if rl := chat.RateLimitOf(err); rl != nil && isV5(cl) {
			props = &packets.Properties{User: []packets.UserProperty{{Key: "retryAfter", Val: strconv.FormatInt(rl.RetryAfterSeconds(), 10)}}}
		}
		return h.refuseWith(cl, packets.ErrServerUnavailable, connectAuthUnavailable, 0, props)
	}
	if errors.Is(err, chat.ErrTokenRevoked) {
		// A client certificate its CA's revocation list names.
		return h.refuse(cl, packets.ErrBadUsernameOrPassword, connectTokenRevoked, cred.user)
	}
	if err != nil {
		return h.refuse(cl, packets.ErrBadUsernameOrPassword, connectBadToken, 0)
	}
	userID := cred.user
	if u := pk.Connect.Username; len(u) > 0 && string(u) != strconv.FormatInt(userID, 10) {
		return h.refuse(cl, packets.ErrBadUsernameOrPassword, connectUsernameMismatch, userID)
	}
	if code, ok := refuseWill(cl, pk); ok {
		clearWill(cl)
		return h.refuse(cl, code, connectWillRefused, userID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	if h.cfg.Service.TokenKnownRevoked(ctx, userID, cred.issuedAt) != nil {
		// Before the user's connect budget: a stolen token (device) they
		// revoked must not keep their own devices out.
		return h.refuse(cl, packets.ErrBadUsernameOrPassword, connectTokenRevoked, userID)
	}
	if err := h.cfg.Service.CheckRate(context.Background(), chat.RateConnectUser, chat.UserKey(userID)); err != nil {
		return h.refuseRate(cl, err, connectRateLimited, userID)
	}
	if existing, ok := h.server.Clients.Get(cl.ID); ok {
		if owner, ok := h.UserOf(existing); ok && owner != userID {
			return h.refuse(cl, clientIDTakenCode(cl), connectClientIDTaken, userID)
		}
	}
	persistent, expiry, capped := persistentSession(cl)
	// Before the session opens: a revoked credential takes nothing over.
	// A revocation announced before this check began is one it reads
	// (or its lift): revokedMeanwhile goes by checked.
	checked := time.Now()
	if err := h.cfg.Service.CheckToken(ctx, userID, cred.issuedAt); errors.Is(err, chat.ErrTokenRevoked) {
		return h.refuse(cl, packets.ErrBadUsernameOrPassword, connectTokenRevoked, userID)
	} else if err != nil {
		h.cfg.Logger.Warn("check token revocation failed", "client", cl.ID, "user", userID, "err", err)
		return h.refuse(cl, packets.ErrServerUnavailable, connectUnavailable, userID)
	}
	keepConnectFields(cl) // before the client id is kept anywhere
	if !h.takeConnSlot(ctx, cl, userID) {
		return h.refuse(cl, h.capCode(cl), connectTooMany, userID)
	}
	leave, ok := h.gate.enter(ctx, cl.ID)
	if !ok {
		h.releaseConnSlot(cl, userID)
		// Answered as unavailable (retry later), counted apart: the
		// database answered, another CONNECT of the id held its turn. A
		// client reconnecting in a loop causes it, no fault of the node's,
		// so it is no warning (the counter shows a storm).
		h.cfg.Logger.Info("connect refused: another connect of the client id did not finish in time", "client", cl.ID, "user", userID)
		return h.refuse(cl, packets.ErrServerUnavailable, connectClientIDBusy, userID)
	}
	token := h.newToken()
	opened, err := h.cfg.Sessions.Open(ctx, cl.ID, token, userID, persistent, cl.Properties.Clean, expiry)
	if err != nil {
		leave()
		h.releaseConnSlot(cl, userID)
		if errors.Is(err, chat.ErrClientIDTaken) {
			return h.refuse(cl, clientIDTakenCode(cl), connectClientIDTaken, userID)
		}
		h.cfg.Logger.Warn("open session failed", "client", cl.ID, "user", userID, "err", err)
		return h.refuse(cl, packets.ErrServerUnavailable, connectUnavailable, userID)
	}
	// The takeover is next: bounded, it ends with the turn.
	stopTakeover := h.boundTakeover(cl)
	turn := func() { stopTakeover(); leave() }
	ci := &clientInfo{userID: userID, persistent: persistent,
		conn: &mqttConn{cl: cl, events: EventsTopic(userID)}, acks: newAckQueue(h.receiveMaximum()), qos0: newFlightLimit(h.receiveMaximum()),
		session: sessionState{present: opened.Present, restore: opened.Subscriptions, expiry: expiry, capped: capped}, token: token,
		authUntil: cred.until, byToken: cred.byToken, issuedAt: cred.issuedAt, checked: checked, connected: turn}
	if persistent {
		hidePersistence(cl)
	}
	h.clients.Store(cl, ci)
	if cl.Net.Conn != nil {
		h.connecting.Store(cl.Net.Conn, cl)
	}
	h.cfg.Metrics.Connects.WithLabelValues(string(connectOK)).Inc()
	return nil
}

// keepConnectFields gives the client copies of what it keeps of its
// CONNECT: mochi decodes the client id, the username and the properties'
// strings as views into the whole packet, which the client would then
// hold, token included, for the connection's life (up to 64 KiB a
// connection, broker.MaxConnectSize, for a client id of at most 256
// bytes). The CONNECT's user properties, which nothing reads, are dropped.
func keepConnectFields(cl *mqtt.Client) {
	cl.ID = strings.Clone(cl.ID)
	cl.Properties.Username = bytes.Clone(cl.Properties.Username)
	cl.Properties.Props.User = nil
}

// OnConnectAuthenticate admits exactly the clients OnConnect accepted.
func (h *Chat) OnConnectAuthenticate(cl *mqtt.Client, _ packets.Packet) bool {
	return h.info(cl) != nil
}

// OnSessionEstablished restores a resumed session's subscriptions and
// starts the client's delivery; it is ready at once when a subscription
// covers the events topic.
func (h *Chat) OnSessionEstablished(cl *mqtt.Client, _ packets.Packet) {
	if cl.Net.Conn != nil {
		h.connecting.Delete(cl.Net.Conn)
	}
	ci := h.info(cl)
	if ci == nil {
		return
	}
	ci.endConnectTurn()
	ci.connacked.Store(true) // before heard: see listedOrNoted
	if h.notices.heard(ci.token) {
		h.closeTakenOver(cl)
		return
	}
	if h.revokedMeanwhile(ci) {
		h.endRevoked(cl, ci)
		return
	}
	if reason, revoked := h.peerRevoked(cl, ci); revoked {
		h.endRevokedBy(cl, ci, "client certificate", reason)
		return
	}
	ci.established.Store(true)
	h.endAtAuthExpiry(cl, ci)
	h.restoreSubscriptions(cl, ci)
	ready := subscribedToEvents(cl, ci.userID)
	h.cfg.Metrics.Online.Inc()
	if err := h.cfg.Hub.Attach(ci.conn, cl.ID, ci.userID, ci.persistent, ready, clientReceiveMaximum(cl)); err != nil {
		// The server is shutting down: nothing would deliver to the
		// client here; it connects again, to a node that runs.
		h.cfg.Logger.Info("delivery refused the client; disconnecting it", "client", cl.ID, "user", ci.userID, "err", err)
		_ = h.server.DisconnectClient(cl, packets.ErrServerShuttingDown)
		return
	}
	if h.cfg.Presence != nil {
		ci.present.Store(true)
		h.cfg.Presence.Connected(cl.ID, ci.token, ci.userID)
	}
}

// clientReceiveMaximum is the most unacknowledged QoS 1 publishes the
// client will take (MQTT 5 Receive Maximum; 0: it set none, which means
// 65535, and v3.1.1 has none). Delivery must keep to it [MQTT-3.3.4-9];
// mochi's own bound on it (its inflight map) is not used for chat
// deliveries, which the session writes itself.
func clientReceiveMaximum(cl *mqtt.Client) int {
	if !isV5(cl) {
		return 0
	}
	return int(cl.Properties.Props.ReceiveMaximum)
}

// OnACLCheck: subscriptions only inside the user's own tree. Publishes are
// all admitted here and decided in OnPublish, because mochi disconnects a
// v3.1.1 client on a denied QoS1 publish instead of ack-and-drop.
func (h *Chat) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	ci := h.info(cl)
	if ci == nil {
		return false
	}
	if write {
		return true
	}
	return SubscribeAllowed(ci.userID, topic)
}

// grantedQoS is the QoS every subscription of a chat client is granted,
// whatever its SUBSCRIBE asked: the Hub delivers at QoS 1 (typing at 0),
// and the delivered cursors and receipts move on the client's PUBACKs.
// Granting a QoS 0 subscription 0 and then sending it QoS 1 publishes
// would break [MQTT-3.8.4-8] (delivery QoS is at most the granted one);
// delivering it at QoS 0 would leave its cursors without acknowledgements.
const grantedQoS = 1

// OnSubscribe caps the number of subscriptions a client may hold; filters
// over the cap are refused (mochi answers them as not authorized). Only a
// filter that would become a new subscription counts: one the ACL refuses
// (SubscribeAllowed) takes no place, and a filter repeated in the packet
// replaces its first occurrence, as one already held does. Every
// subscription is granted QoS 1 (grantedQoS) and holds a copy of its
// filter alone.
func (h *Chat) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	ci := h.info(cl)
	if ci == nil {
		return pk
	}
	have := cl.State.Subscriptions.Len()
	counted := make(map[string]bool, len(pk.Filters))
	kept := pk.Filters[:0:0]
	for _, f := range pk.Filters {
		f.Qos = grantedQoS
		allowed := SubscribeAllowed(ci.userID, f.Filter)
		if allowed {
			// mochi decodes the filter as a view into the whole
			// SUBSCRIBE (up to the Maximum Packet Size, whatever else it
			// carries), which the subscription would hold for its life.
			f.Filter = strings.Clone(f.Filter)
		}
		_, exists := cl.State.Subscriptions.Get(f.Filter)
		if !exists && !counted[f.Filter] && allowed {
			if have >= h.cfg.MaxSubscriptions {
				f.Filter = TopicPrefix + "denied/over-subscription-limit"
			} else {
				have++
				counted[f.Filter] = true
			}
		}
		kept = append(kept, f)
	}
	pk.Filters = kept
	return pk
}

// OnSubscribed records a persistent session's subscriptions and releases
// event delivery once the events topic is subscribed. A shared filter is
// answered 0x9E (caps.go).
func (h *Chat) OnSubscribed(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	ci := h.info(cl)
	if ci == nil {
		return
	}
	refuseSharedAsNotSupported(cl, pk, codes)
	for i, f := range pk.Filters {
		if i < len(codes) && codes[i] < 0x80 {
			h.untree(cl, f.Filter)
		}
	}
	h.recordSubscriptions(cl, ci, subscribedNow(cl, pk, codes))
	events := EventsTopic(ci.userID)
	for i, f := range pk.Filters {
		if i < len(codes) && codes[i] < 0x80 && FilterMatches(f.Filter, events) {
			h.cfg.Hub.SetReady(cl.ID, ci.conn, true)
			return
		}
	}
}

// OnUnsubscribe puts the filters back into mochi's topic tree for the
// UNSUBSCRIBE mochi is about to process (see untree).
func (h *Chat) OnUnsubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if h.info(cl) == nil {
		return pk
	}
	for _, f := range pk.Filters {
		h.retree(cl, f.Filter)
	}
	return pk
}

// OnUnsubscribed records a persistent session's subscriptions and holds
// event delivery when none covers events.
//
// Only a client's own UNSUBSCRIBE counts. mochi also calls this hook from
// UnsubscribeClient, its clean-up of a connection it believes clean (every
// persistent one: hidePersistence), with a packet it made up whose packet
// id is 0, which no UNSUBSCRIBE from the wire has (the fixed header must
// say QoS 1 and UnsubscribeValidate then wants an id). On a takeover that
// clean-up runs for the old connection before the new one's CONNACK, and
// recording its now empty list would wipe the subscriptions the session
// resumes with (and hold delivery by client id). Keying on the packet
// rather than on the old connection's state (Closed, IsTakenOver) does not
// depend on mochi's order of closing, marking and unsubscribing.
func (h *Chat) OnUnsubscribed(cl *mqtt.Client, pk packets.Packet) {
	ci := h.info(cl)
	if ci == nil || pk.PacketID == 0 {
		return
	}
	h.recordSubscriptions(cl, ci, nil)
	if !subscribedToEvents(cl, ci.userID) {
		h.cfg.Hub.SetReady(cl.ID, ci.conn, false)
	}
}

// subscribedToEvents is whether one of cl's subscriptions covers the
// events topic of user.
func subscribedToEvents(cl *mqtt.Client, user int64) bool {
	if cl.State.Subscriptions.Len() == 0 {
		return false // a fresh session's, before its SUBSCRIBE: no copy of the empty list
	}
	events := EventsTopic(user)
	for filter := range cl.State.Subscriptions.GetAll() {
		if FilterMatches(filter, events) {
			return true
		}
	}
	return false
}

// OnPacketRead sees every inbound packet first: PUBACKs for our own
// deliveries go to the session pump (mochi's inflight map is not used), a
// publish above the maximum QoS or with an invalid topic alias ends the
// connection (caps.go, alias.go), no alias is recorded for a topic that
// will be refused and one recorded holds a copy of its topic alone
// (alias.go), a SUBSCRIBE with a Subscription Identifier or one MQTT 5
// makes a protocol error ends the connection (caps.go), and the retain
// flag is cleared because chat never retains. A CONNECT's empty password
// is no password (auth.go), and a CONNECT mochi would refuse itself is
// answered here with the code MQTT gives its mistake (connectcheck.go).
func (h *Chat) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	switch pk.FixedHeader.Type {
	case packets.Connect:
		emptyPasswordIsNone(&pk)
		if err := h.refuseBadConnect(cl, pk); err != nil {
			return pk, err
		}
	case packets.Puback:
		if ci := h.info(cl); ci != nil {
			h.cfg.Hub.Acked(cl.ID, ci.conn, pk.PacketID)
		}
	case packets.Disconnect:
		takeDisconnectExpiry(h.info(cl), &pk)
		withoutWill(&pk)
	case packets.Subscribe:
		if err := refuseSubscriptionIdentifiers(h.server, cl, pk); err != nil {
			return pk, err
		}
		if err := refuseSubscribeProtocolErrors(h.server, cl, pk); err != nil {
			return pk, err
		}
	case packets.Publish:
		if err := refuseQoSAbove(h.server, cl, pk); err != nil {
			h.cfg.Metrics.Publishes.WithLabelValues("denied", "qos_not_supported").Inc()
			return pk, err
		}
		if err := refuseInvalidAlias(h.server, cl, pk); err != nil {
			h.cfg.Metrics.Publishes.WithLabelValues("denied", "topic_alias_invalid").Inc()
			return pk, err
		}
		dropRefusedAlias(cl, &pk)
		copyAliasTopic(&pk)
		pk.FixedHeader.Retain = false
		if pk.FixedHeader.Qos > 0 && mochiDropsPublish(pk, h.server.Options.Capabilities.TopicAliasMaximum) {
			// mochi drops this publish before any publish hook, with no
			// PUBACK: a QoS 1 client would resend forever. Answer it as
			// every refused publish is answered. Only these: any other
			// publish reaches OnPublish, which answers it (a $foo topic
			// refused there too), and answering it here as well would
			// send two PUBACKs with one packet id.
			h.refuseSystemTopic(cl, pk)
		}
	}
	return pk, nil
}

// mochiDropsPublish is whether mochi's processPublish silently drops pk:
// its topic is one mochi's IsValidFilter refuses for publishing ($SYS…, a
// bare $share or $share/group), the very test processPublish makes. A
// publish that fails mochi's PublishValidate first (a wildcard in the
// topic) is not dropped but ends the connection as a protocol error, and
// gets no answer here either.
func mochiDropsPublish(pk packets.Packet, topicAliasMaximum uint16) bool {
	return pk.PublishValidate(topicAliasMaximum) == packets.CodeSuccess && !mqtt.IsValidFilter(pk.TopicName, true)
}

// refuseSystemTopic answers a publish mochi would drop ($SYS…, $share) as
// every refused publish is answered, in its place in the connection's
// PUBACK order.
func (h *Chat) refuseSystemTopic(cl *mqtt.Client, pk packets.Packet) {
	ci := h.info(cl)
	if ci == nil {
		return
	}
	if p := h.begin(cl, ci, pk); p != nil {
		p.fail("denied", chat.Errorf(chat.CodeForbidden, "publishing to this topic is not allowed"), 0, "")
	}
}

// OnPacketEncode fixes mochi's PUBACK success reason: it sends 0x01
// (granted QoS 1), which MQTT v5 does not define for PUBACK; 0x00 is success.
// It also completes v5 CONNACKs with the server's capabilities (caps.go),
// keeps DISCONNECT packets from 3.1.1 clients (disconnect.go) and gives
// them 3.1.1 CONNACK codes (will.go).
func (h *Chat) OnPacketEncode(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type == packets.Puback && pk.ReasonCode == packets.CodeGrantedQos1.Code {
		pk.ReasonCode = packets.CodeSuccess.Code
	}
	if pk.FixedHeader.Type == packets.Connack || pk.FixedHeader.Type == packets.Disconnect {
		// mochi strips reason strings and user properties from every
		// packet to a client with Request Problem Information 0; MQTT 5
		// forbids them on the other packets only [MQTT-3.1.2-29], and a
		// refusal's retryAfter and the reason a connection ends are what
		// such a client needs most. The Maximum Packet Size still applies.
		pk.Mods.DisallowProblemInfo = false
	}
	if pk.FixedHeader.Type == packets.Connack {
		ci := h.info(cl)
		if ci != nil && pk.ReasonCode == packets.CodeSuccess.Code && cl.State.Subscriptions.Len() > 0 {
			// A takeover of a client mochi still held has just copied its
			// filters into the tree and the client's list
			// (inheritClientSession); out of the tree again before the
			// client learns it is connected, and out of its list too when
			// its session is not present: the client, told it has no
			// subscriptions, would get events it never asked for here.
			for filter := range cl.State.Subscriptions.GetAll() {
				h.untree(cl, filter)
				if !ci.session.present {
					cl.State.Subscriptions.Delete(filter)
				}
			}
		}
		pk = announceSession(ci, announceBodyLimit(h.cfg.Service.Limits.MaxBodyBytes, announceCapabilities(h.server.Options.Capabilities, pk)))
	}
	return withholdV311Disconnect(cl, v311Connack(cl, pk))
}

// OnDisconnect stops delivery and ends the session or records when it was
// last seen (a persistent one lives on in PostgreSQL alone: session.go),
// either only while this connection is the one that opened it last
// (newToken). Then mochi's clean-up of the connection runs in a connect
// turn of its client id (cleanUpInTurn).
func (h *Chat) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.disconnected(cl)
	h.cleanUpInTurn(cl)
}

// disconnected is OnDisconnect's work for the hook's record of cl.
func (h *Chat) disconnected(cl *mqtt.Client) {
	forgetAliases(cl)
	ci := h.info(cl)
	if ci == nil {
		return
	}
	h.clients.Delete(cl)
	ci.endConnectTurn()
	if ci.authEnd != nil {
		ci.authEnd.Stop()
	}
	if cl.Net.Conn != nil {
		h.connecting.Delete(cl.Net.Conn)
	}
	h.releaseConnSlot(cl, ci.userID)
	if ci.established.Load() {
		h.cfg.Metrics.Online.Dec()
	}
	ci.acks.close()
	ci.qos0.close()
	h.cfg.Hub.Detach(cl.ID, ci.conn)
	if h.cfg.Presence != nil && ci.present.Swap(false) {
		h.cfg.Presence.Disconnected(cl.ID, ci.userID)
	}
	if cl.IsTakenOver() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if !ci.persistent || ci.session.ended {
		err = h.cfg.Sessions.Drop(ctx, cl.ID, ci.token)
	} else {
		err = h.cfg.Sessions.Touch(ctx, cl.ID, ci.token, ci.session.expiry)
	}
	if err != nil {
		h.cfg.Logger.Warn("record disconnect failed", "client", cl.ID, "err", err)
	}
}

// ConnectionEnded is called by the listener once mochi is done with conn.
// A client OnConnect accepted that mochi dropped before establishing its
// session (the CONNACK could not be written: the peer went, or the
// CONNACK exceeds the client's Maximum Packet Size) gets neither
// OnSessionEstablished nor OnDisconnect, and mochi keeps it in its client
// list: without this, its record here, a clean session's row and mochi's
// client would stay for the life of the process (its connection slot until
// RefreshConnections pruned it). It ends as a disconnect.
//
// A connection that ended after its session was established has had its
// OnDisconnect and mochi's clean-up: the connect turn that clean-up took
// ends here (cleanUpInTurn).
func (h *Chat) ConnectionEnded(conn net.Conn) {
	if end, ok := h.ending.LoadAndDelete(conn); ok {
		end.(func())()
	}
	v, ok := h.connecting.LoadAndDelete(conn)
	if !ok {
		return
	}
	cl := v.(*mqtt.Client)
	// Still in the client's connect turn (it ends below), so no CONNECT
	// of the id lists itself between the look-up and the delete.
	if c, ok := h.server.Clients.Get(cl.ID); ok && c == cl {
		h.server.Clients.Delete(cl.ID)
	}
	h.disconnected(cl)
}

// Drain refuses new publishes, waits until those being processed have
// their answers queued on their connections' sessions (a committed send's
// PUBACK among them; the sessions write them as they stop) and stops the
// RPC workers (graceful shutdown).
func (h *Chat) Drain(ctx context.Context) error {
	h.draining.Store(true)
	for h.busy.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return h.rpc.close(ctx)
}

// receiveMaximum is the Receive Maximum the broker announces: the most
// QoS 1 publishes a client may have unacknowledged.
func (h *Chat) receiveMaximum() int {
	if h.server != nil && h.server.Options != nil && h.server.Options.Capabilities != nil {
		if n := int(h.server.Options.Capabilities.ReceiveMaximum); n > 0 {
			return n
		}
	}
	return 65535
}
