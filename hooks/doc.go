// Package hooks translates MQTT to the chat domain and back. It is the only
// package that knows both mochi and chat: CONNECT passwords become user ids,
// topics become Service calls, domain errors become PUBACK reason codes (v5)
// or ack-and-drop plus an error event (v3.1.1), and connections become
// delivery sessions.
//
// It depends on the domain (package chat) alone: sessions are a
// chat.SessionStore, delivery a chat.Delivery (delivery.Hub), and each
// client connection a chat.Conn (mqttConn) that its delivery session
// writes.
//
// mochi calls the hooks on each client's own read goroutine, which never
// waits for PostgreSQL here: OnPublish validates the publish and hands it
// to the domain (a send to group commit, in publish order; reads, typing
// and RPC to goroutines of their own, RPC to a bounded pool), then returns
// without letting mochi acknowledge or route it. Each QoS 1 publish takes
// its place in the connection's ackQueue; its answer (PUBACK, with the
// commit's seq) is given when its work is done, after the commit, and
// released to the connection's delivery session only when every earlier
// publish has its own, so PUBACKs leave in publish order (MQTT v5 §4.6)
// whatever order the commits finish in. Meanwhile the read loop keeps
// reading: the client's PUBACKs of its deliveries are processed while its
// sends commit, and several publishes in flight share one group commit.
// At most Receive Maximum publishes wait per connection: a v5 client
// beyond it is disconnected (0x93), a 3.1.1 client is not read until one
// is answered. At most as many answers wait to be written: a client that
// reads none of its PUBACKs is not read either until they go out.
//
// With Config.Tracer, each publish of a stream change is a span (chat.send,
// chat.edit, chat.recall, chat.react) continuing the trace of its
// traceparent user property (MQTT v5), with chat.validate and chat.puback
// children; the span ends when delivery wrote the PUBACK (chat.Ack.Sent).
// RPC requests get chat.rpc. docs/operations.md lists the attributes.
//
// The broker never routes a client's publish to subscribers and never
// retains: all delivery goes through the Hub. mochi's other ways to
// deliver, which bypass OnPublish and the publish ACL, are closed: a
// CONNECT with a Will is refused (will.go), the inline client is off, and
// $SYS and retained messages match no filter the subscribe ACL grants.
// What the CONNACK says is unavailable is refused as MQTT 5 asks: a
// SUBSCRIBE with a Subscription Identifier ends the connection (caps.go),
// a shared subscription ($share/… in any letter case, as mochi takes
// one) gets SUBACK 0x9E (caps.go), and an AUTH packet
// ends the connection, chatd having no enhanced authentication (a
// CONNECT naming an Authentication Method is refused: auth.go).
// Clients see CONNACK codes of their own protocol version only, and 3.1.1
// clients never get a DISCONNECT (disconnect.go). A CONNECT mochi would
// refuse itself, as a protocol error whatever was wrong, is answered in
// OnPacketRead with the code MQTT gives its mistake, and counted
// (connectcheck.go): no client's own mistake gets 0x03 "try again later". CONNECT (Sessions.Open)
// and SUBSCRIBE/UNSUBSCRIBE of a persistent session (its subscriptions
// are recorded before the acknowledgement) are the exchanges that wait for
// PostgreSQL on the read goroutine: until their answer the connection has
// nothing else to do.
//
// Sessions (session.go): a persistent session's whole state is in
// PostgreSQL, its cursors and its subscriptions, so mochi forgets a
// client when it disconnects; it resumes on any node, after any restart,
// with session present and its subscriptions restored. A chat client's
// subscriptions are kept in its own list only, never in mochi's topic
// tree (untree: the Hub delivers, the tree would route nothing and cost
// ~2 KiB a connection). The CONNECTs of one client id on a node take
// turns from the session's open to their CONNACK (connectorder.go), so the
// connection mochi keeps is the one that holds the session, and mochi's
// clean-up of a connection that ended takes a turn too, so it cannot
// remove a newer connection from mochi's list; an old
// connection that does not take its takeover's DISCONNECT within
// TakeoverGrace is closed without it (takeover.go), so it cannot hold the
// turn. A CONNECT whose turn does not come within SendTimeout is refused
// 0x88 (chat_mqtt_connects_total{outcome="client_id_busy"}). No
// DISCONNECT comes before a connection's CONNACK: a takeover notice from
// another node (SessionTakenOver) naming a connection not yet listed, or
// listed without its CONNACK, and a revocation or client CA change heard
// meanwhile, end it once OnSessionEstablished runs [MQTT-3.2.0-1].
//
// Authentication: a connection with a transport identity (Config.PeerUser:
// a verified TLS client certificate) is that user and its password is not
// looked at; every other connection authenticates with the JWT in its
// password. A username, if sent, must be the user id either way. The
// connection ends (v5 DISCONNECT 0x87) when that identity expires: the
// token's exp plus the verifier's leeway, the certificate's NotAfter
// (tokenexpiry.go), or when its user revokes their credentials
// (tokenrevoke.go: tokens by iat, certificates by NotBefore): OnConnect
// refuses a revoked credential before the session opens (a database
// read), TokensRevoked ends the connections a revoked one opened, and a
// connection whose CONNECT read the database just before a revocation
// committed and that registered after its announcement finds it in the
// hook's memory of recent revocations at OnSessionEstablished (one whose
// read began after the announcement read it, or its lift, and is left
// alone). A
// certificate its CA revoked, or whose CA was removed from the client CAs
// (PeerUser's error wraps chat.ErrTokenRevoked), is refused the same way;
// when the CAs or their lists change, PeersChanged asks
// PeerUser again about every such connection and ends those it now
// refuses, and OnSessionEstablished asks once more for one that
// registered meanwhile.
//
// Limits: OnConnect charges the per-IP (IPv6: per /64) connect limit first
// (CONNACK 0x9F, 0x03 for 3.1.1), then waits for its turn in the node's
// connect budget (admission.go: up to ConnectBudget.Queue CONNECTs wait,
// each on its own goroutine; beyond, 0x9F / 0x03), then verifies the token,
// then charges the per-user connect limit (0x9F / 0x03) and takes a slot of
// the per-user connection cap (conncap.go: the newest over it gets 0x97 /
// 0x03; a client id the user holds always gets in; across nodes through
// SharedConns). OnDisconnect gives the slot back; RefreshConnections,
// called every 30 s by the owner, also frees slots of connections mochi
// closed without OnDisconnect. Sends and receipts are limited by the
// Service, typing here. Sessions that reach OnSessionEstablished are
// reported to Presence, and reported gone from OnDisconnect however the
// connection ended (takeovers included: Presence counts connections). A
// client OnConnect accepted whose CONNACK mochi could not write gets no
// OnDisconnect from mochi: the listener calls ConnectionEnded once mochi is
// done with the connection, which ends such a client as a disconnect (and
// takes it out of mochi's client list, where mochi leaves it).
package hooks
