// Package broker assembles the embedded mochi MQTT server for chat: the TCP
// listener (id "tcp"), the MQTT over TLS listener ("tls"), the WebSocket
// listeners served at /mqtt on chatd's HTTP ("ws") and HTTPS ("wss")
// servers (same origin as the web page, or a configured extra origin, on
// both; other browsers refused), optional PROXY protocol on both TCP
// listeners from trusted networks only (ProxyProtocol), X-Forwarded-For
// on the WebSocket listeners from trusted proxies only (ClientAddr: the
// client's address is what mochi, the connect limit and the logs see),
// capabilities
// that match chat's semantics (QoS ≤ 1, no retain) and the shutdown order:
// stop accepting, let in-flight publishes commit and ack, flush delivery
// cursors, disconnect clients (MQTT 5: DISCONNECT 0x8B; 3.1.1, which has no
// server DISCONNECT: the socket is closed, see hooks). The caller closes
// the database afterwards.
//
// Every listener caps the connections of one client address (an IPv6
// one: its /64; the address the connect limit sees) that have not sent
// their CONNECT (Config.MaxPendingPerIP): connect limits apply to a
// CONNECT, so connections that send nothing would otherwise each hold a
// descriptor until the connect timeout, and one host re-opening them could
// exhaust the node's. One over the cap is closed before mochi reads it
// (WebSocket: 429 before the upgrade), counted by
// hooks.Chat.CountTooManyPending. Behind the PROXY protocol a connection
// counts while its header is awaited too, under its peer's address, then
// under the client's the header names.
//
// Every listener's connection (connectCapped) also keeps its first
// packet's body while it is a CONNECT within MaxConnectSize, for the chat
// hook, which takes it and reads from it what mochi's decoding forgets (a
// v5 property sent as 0 or twice: hooks' connectcheck.go). One read whole
// that no hook took when mochi closes the connection is one mochi could
// not decode (mochi closes those unanswered, before any hook): it is
// decoded then, as mochi did, and gets CONNACK 0x81 with the reason first
// when it is MQTT 5, and is counted (hooks.Chat.CountUnreadableConnect).
// A CONNECT decoded is so decoded once, by mochi, on a reconnect storm's
// hot path.
//
// A client's listener id is its transport (mqtt.Client.Net.Listener).
// Every listener tells the chat hook when mochi is done with a connection
// (hooks.Chat.ConnectionEnded), on the connection's own goroutine, after
// every hook call mochi made for it.
//
// Broker methods are called by the owner goroutine (chatd's main); the
// WebSocket handler is safe for concurrent use.
package broker
