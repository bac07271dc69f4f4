package hooks

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// A persistent session lives in PostgreSQL, not in the broker: its
// cursors (delivery) and its subscriptions (chat_session.subscriptions,
// recorded before each SUBACK). mochi would keep every offline persistent
// client in memory until its session expires (its client, read buffer,
// outbound queue, subscriptions and topic-tree entries: kilobytes each,
// for days), on one node only and not across a restart. So chatd lets
// mochi forget the client when it disconnects, as it does a clean one, and
// rebuilds the session from PostgreSQL when it comes back, on whichever
// node:
//
//   - OnConnect opens the session (Sessions.Open) and, for a persistent
//     one, hides its persistence from mochi (v5 session expiry 0, v3.1.1
//     clean session), before mochi knows the client; the expiry the client
//     asked for, capped, is still the session's, recorded in PostgreSQL and
//     announced in the CONNACK when capped;
//   - the CONNACK says session present when PostgreSQL resumed the session
//     with its subscriptions (sessionPresent), which mochi cannot know;
//   - OnSessionEstablished restores the recorded subscriptions;
//   - OnSubscribed and OnUnsubscribed record the subscriptions before the
//     SUBACK/UNSUBACK goes out: acknowledged means recorded; mochi's own
//     unsubscribing of a connection it ends or sees taken over records
//     nothing (OnUnsubscribed);
//   - a DISCONNECT's session expiry (v5 may change it, 0 ends the session)
//     is taken out of the packet for mochi and applied to PostgreSQL.

// sessionState is what the hook keeps of a connection's session.
type sessionState struct {
	present bool // CONNACK session present
	restore []chat.Subscription
	// expiry is the session's expiry (capped); capped says the client
	// asked for more and must be told. These change only on the
	// connection's own goroutine (OnConnect, OnPacketRead, OnDisconnect).
	expiry time.Duration
	capped bool
	ended  bool // DISCONNECT with session expiry 0
}

// hidePersistence makes mochi treat a persistent session as one that ends
// with its connection; called in OnConnect, before mochi lists the client
// (its expiry sweep reads these fields of every listed client).
func hidePersistence(cl *mqtt.Client) {
	if isV5(cl) {
		cl.Properties.Props.SessionExpiryInterval = 0
		cl.Properties.Props.SessionExpiryIntervalFlag = false
	} else {
		cl.Properties.Clean = true
	}
}

// announceSession completes a successful CONNACK of a chat client: session
// present as PostgreSQL found it, and, for v5, the capped session expiry.
func announceSession(ci *clientInfo, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || pk.ReasonCode != packets.CodeSuccess.Code || ci == nil {
		return pk
	}
	pk.SessionPresent = ci.session.present
	if pk.ProtocolVersion == 5 && ci.session.capped {
		pk.Properties.SessionExpiryInterval = uint32(ci.session.expiry / time.Second)
		pk.Properties.SessionExpiryIntervalFlag = true
	}
	return pk
}

// restoreSubscriptions gives a resumed session back the subscriptions
// recorded for it.
func (h *Chat) restoreSubscriptions(cl *mqtt.Client, ci *clientInfo) {
	for _, r := range ci.session.restore {
		sub := packets.Subscription{Filter: r.Filter, Qos: grantedQoS} // recorded at QoS 0 before it was the rule
		if !SubscribeAllowed(ci.userID, sub.Filter) {
			continue // recorded under other rules: not any more
		}
		cl.State.Subscriptions.Add(sub.Filter, sub) // the client's own list only: see untree
	}
	ci.session.restore = nil
}

// chatd writes every delivery to its client itself (the delivery session
// through mqttConn) and a chat client may subscribe only inside its own
// tree (SubscribeAllowed), so mochi's topic tree never routes anything to
// a chat subscription: held there it would only be memory, about 2 KiB a
// connection (a map of mochi's subscriptions per filter and the tree's
// nodes for the user's levels). A chat client's subscriptions therefore
// live in the client's own list (cl.State.Subscriptions, what mochi and
// recordSubscriptions read) alone: untree takes the ones mochi has just
// added to the tree out again (OnSubscribed), and retree puts a filter
// back for the instant of an UNSUBSCRIBE (OnUnsubscribe), so that mochi
// answers it as the removal of a subscription that existed.
func (h *Chat) untree(cl *mqtt.Client, filter string) {
	if h.server.Topics.Unsubscribe(filter, cl.ID) {
		atomic.AddInt64(&h.server.Info.Subscriptions, -1)
	}
}

func (h *Chat) retree(cl *mqtt.Client, filter string) {
	if sub, ok := cl.State.Subscriptions.Get(filter); ok && h.server.Topics.Subscribe(cl.ID, sub) {
		atomic.AddInt64(&h.server.Info.Subscriptions, 1)
	}
}

// recordSubscriptions writes the client's subscriptions (subs, or when nil
// all the client's list holds) to its persistent session before mochi
// acknowledges the SUBSCRIBE or UNSUBSCRIBE; when that fails the
// connection ends instead, so the client never believes in a subscription
// its session would not resume with.
func (h *Chat) recordSubscriptions(cl *mqtt.Client, ci *clientInfo, subs []chat.Subscription) {
	if !ci.persistent {
		return
	}
	if subs == nil {
		subs = clientSubscriptions(cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SendTimeout)
	defer cancel()
	if err := h.cfg.Sessions.SaveSubscriptions(ctx, cl.ID, ci.token, subs); err != nil {
		h.cfg.Logger.Warn("record subscriptions failed; disconnecting the client", "client", cl.ID, "user", ci.userID, "err", err)
		_ = h.server.DisconnectClient(cl, packets.ErrServerUnavailable)
	}
}

// takeDisconnectExpiry applies a v5 DISCONNECT's session expiry to the
// persistent session and removes it from the packet: mochi believes the
// session expiry was 0 and would call a non-zero one a protocol error. A
// session that was never persistent keeps the property, and mochi's error.
func takeDisconnectExpiry(ci *clientInfo, pk *packets.Packet) {
	if ci == nil || !ci.persistent || !pk.Properties.SessionExpiryIntervalFlag {
		return
	}
	exp := time.Duration(pk.Properties.SessionExpiryInterval) * time.Second
	if exp == 0 {
		ci.session.ended = true
	} else {
		ci.session.expiry = min(exp, MaxSessionExpiry)
	}
	pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 0, false
}

// clientSubscriptions is the client's list (cl.State.Subscriptions).
func clientSubscriptions(cl *mqtt.Client) []chat.Subscription {
	all := cl.State.Subscriptions.GetAll() // a copy of mochi's map
	subs := make([]chat.Subscription, 0, len(all))
	for _, s := range all {
		subs = append(subs, chat.Subscription{Filter: s.Filter, QoS: s.Qos})
	}
	return subs
}

// subscribedNow is the client's list right after mochi granted a SUBSCRIBE
// (codes) when that packet's filters are all it holds, as after a
// connection's first SUBSCRIBE, else nil. It spares the copy of mochi's
// map that listing it takes (clientSubscriptions): ~750 bytes of garbage,
// in the size class of the map each connection keeps, per SUBSCRIBE.
func subscribedNow(cl *mqtt.Client, pk packets.Packet, codes []byte) []chat.Subscription {
	held := cl.State.Subscriptions.Len()
	if held > len(pk.Filters) {
		return nil
	}
	subs := make([]chat.Subscription, 0, held)
	for i, f := range pk.Filters {
		if i >= len(codes) || codes[i] >= 0x80 {
			continue
		}
		if slices.ContainsFunc(subs, func(s chat.Subscription) bool { return s.Filter == f.Filter }) {
			continue // repeated in the packet: one subscription
		}
		s, ok := cl.State.Subscriptions.Get(f.Filter)
		if !ok {
			return nil
		}
		subs = append(subs, chat.Subscription{Filter: s.Filter, QoS: s.Qos})
	}
	if len(subs) != held {
		return nil // the list holds others too
	}
	return subs
}
