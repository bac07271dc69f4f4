// Package hooks translates MQTT to the chat domain and back. It is the only
// package that knows both mochi and chat: CONNECT passwords become user ids,
// topics become Service calls, domain errors become PUBACK reason codes (v5)
// or ack-and-drop plus an error event (v3.1.1), and connections become
// delivery sessions.
//
// mochi calls the hooks on each client's own read goroutine. OnPublish runs
// the PostgreSQL transaction there, before mochi writes the PUBACK, so an
// acknowledged message is a committed message. Fan-out never happens here:
// the Service notifies the delivery Hub, which has its own goroutines.
//
// The broker never routes a client's publish to subscribers (every publish
// is marked Ignore) and never retains: all delivery goes through the Hub.
// mochi's other ways to deliver, which bypass OnPublish and the publish
// ACL, are closed: a CONNECT with a Will is refused (will.go), the inline
// client is off, and $SYS and retained messages match no filter the
// subscribe ACL grants. Clients see CONNACK codes of their own protocol
// version only, and 3.1.1 clients never get a DISCONNECT (disconnect.go).
//
// Limits: OnConnect charges the per-IP connect limit before anything else
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
// connection ended (takeovers included: Presence counts connections).
package hooks
