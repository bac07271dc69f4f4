package hooks

import (
	"errors"
	"sync"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// tokenRevokedReason and certRevokedReason are the reason strings of the
// DISCONNECT that ends a connection whose token (client certificate) its
// user revoked.
const (
	tokenRevokedReason = "the token this connection was authenticated with was revoked: sign in again"
	certRevokedReason  = "the client certificate this connection was authenticated with was revoked: connect with one issued since"
	// peerRefusedReason is for a PeerUser refusal that gives no reason
	// of its own (ClientReason).
	peerRefusedReason = "the client certificate this connection was authenticated with is no longer accepted"
)

// revocationMemory is how long an announced revocation is remembered for
// connections that checked the database before it committed and register
// after it was announced (their CONNECT takes at most the send timeout).
const revocationMemory = 10 * time.Minute

// revocations are the token revocations announced lately, by user.
type revocations struct {
	mu sync.Mutex
	m  map[int64]revocation
}

type revocation struct {
	before time.Time // tokens issued before it are refused
	heard  time.Time // when it was announced
}

// TokensRevoked ends this node's connections authenticated by a token or
// a client certificate of userID issued before before
// (chat.TokenStore.RevokeTokens, announced to every node:
// store.Sessions.Watch). MQTT 5 clients get DISCONNECT 0x87 not
// authorized with a reason string, 3.1.1 ones a close; a CONNECT with
// such a credential is refused as a bad one. It must not block: the
// disconnects run on goroutines of their own.
func (h *Chat) TokensRevoked(userID int64, before time.Time) {
	now := time.Now()
	h.revoked.mu.Lock()
	if h.revoked.m == nil {
		h.revoked.m = map[int64]revocation{}
	}
	for u, r := range h.revoked.m {
		if now.Sub(r.heard) > revocationMemory {
			delete(h.revoked.m, u)
		}
	}
	// Heard again at the same instant (revoked again after a lift), it
	// is heard now: revokedMeanwhile goes by when.
	if r, ok := h.revoked.m[userID]; !ok || !before.Before(r.before) {
		h.revoked.m[userID] = revocation{before: before, heard: now}
	}
	h.revoked.mu.Unlock()
	// A connection registered (OnConnect) after the unlock sees the entry
	// in revokedMeanwhile; one registered before it is found here. One
	// without its CONNACK yet is left to revokedMeanwhile too, which it
	// checks after marking its CONNACK written (OnSessionEstablished): a
	// DISCONNECT must not come before the CONNACK [MQTT-3.2.0-1].
	h.clients.Range(func(cl *mqtt.Client, ci *clientInfo) bool {
		if ci.userID == userID && chat.TokenRevoked(before, ci.issuedAt) && ci.revoking.Load() == 0 && ci.connacked.Load() {
			go h.endRevoked(cl, ci)
		}
		return true
	})
}

// revokedMeanwhile reports whether a revocation announced since ci's
// CONNECT began checking the database refuses its credential. One
// announced before then committed before then: that check read it, or
// its lift (an operator's DELETE), and is not overruled.
func (h *Chat) revokedMeanwhile(ci *clientInfo) bool {
	h.revoked.mu.Lock()
	r, ok := h.revoked.m[ci.userID]
	h.revoked.mu.Unlock()
	return ok && chat.TokenRevoked(r.before, ci.issuedAt) && !r.heard.Before(ci.checked)
}

// endAfterRevoking ends cl, which asked to revoke its user's tokens (RPC
// tokens.revoke) and was answered, once the answer and the PUBACK queued
// before are written, if the revocation refuses its credential (the request
// may have failed). Until then TokensRevoked leaves cl alone: its
// announcement comes through PostgreSQL, often before the answer is
// written, and a DISCONNECT written first lost the answer.
func (h *Chat) endAfterRevoking(cl *mqtt.Client, ci *clientInfo) {
	end := func() {
		ci.revoking.Add(-1)
		if h.revokedMeanwhile(ci) {
			go h.endRevoked(cl, ci)
		}
	}
	if !h.cfg.Hub.After(cl.ID, ci.conn, end) {
		end()
	}
}

// PeersChanged ends this node's connections authenticated by their
// transport identity that Config.PeerUser now refuses as revoked: the
// client CAs or their revocation lists changed. MQTT 5 clients get
// DISCONNECT 0x87 with a reason string, as TokensRevoked's do. It must not
// block. A connection without its CONNACK yet checks for itself once it
// has it (OnSessionEstablished).
func (h *Chat) PeersChanged() {
	h.clients.Range(func(cl *mqtt.Client, ci *clientInfo) bool {
		if !ci.connacked.Load() {
			return true
		}
		if reason, revoked := h.peerRevoked(cl, ci); revoked {
			go h.endRevokedBy(cl, ci, "client certificate", reason)
		}
		return true
	})
}

// clientReasoned is a PeerUser error that says what the client of a
// connection it ends is told (auth's certificate refusals).
type clientReasoned interface{ ClientReason() string }

// peerRevoked reports whether ci's connection, authenticated by its
// transport identity, is now refused as revoked, and the reason its
// client is told. OnSessionEstablished asks too: a connection registered
// after PeersChanged looked is checked against what that call announced.
func (h *Chat) peerRevoked(cl *mqtt.Client, ci *clientInfo) (reason string, revoked bool) {
	if ci.byToken || h.cfg.PeerUser == nil || cl.Net.Conn == nil {
		return "", false
	}
	_, _, _, _, err := h.cfg.PeerUser(cl.Net.Conn)
	if !errors.Is(err, chat.ErrTokenRevoked) {
		return "", false
	}
	var r clientReasoned
	if errors.As(err, &r) {
		return r.ClientReason(), true
	}
	return peerRefusedReason, true
}

// endRevoked ends cl, whose token or client certificate was revoked.
func (h *Chat) endRevoked(cl *mqtt.Client, ci *clientInfo) {
	credential, reason := "token", tokenRevokedReason
	if !ci.byToken {
		credential, reason = "client certificate", certRevokedReason
	}
	h.endRevokedBy(cl, ci, credential, reason)
}

// endRevokedBy ends cl, whose credential was revoked, with reason.
func (h *Chat) endRevokedBy(cl *mqtt.Client, ci *clientInfo, credential, reason string) {
	if cl.Closed() {
		return
	}
	h.cfg.Logger.Info("credential revoked; disconnecting the client", "client", cl.ID, "user", ci.userID, "credential", credential)
	h.cfg.Metrics.TokenRevoked.Inc()
	_ = h.server.DisconnectClient(cl, packets.Code{Code: packets.ErrNotAuthorized.Code, Reason: reason})
}
