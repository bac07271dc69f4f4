// Package broker assembles the embedded mochi MQTT server for chat: the TCP
// listener, the WebSocket listener served at /mqtt on chatd's HTTP server
// (same origin as the web page; cross-origin browsers refused), capabilities
// that match chat's semantics (QoS ≤ 1, no retain) and the shutdown order:
// stop accepting, let in-flight publishes commit and ack, flush delivery
// cursors, disconnect clients (MQTT 5: DISCONNECT 0x8B; 3.1.1, which has no
// server DISCONNECT: the socket is closed, see hooks). The caller closes
// the database afterwards.
//
// Broker methods are called by the owner goroutine (chatd's main); the
// WebSocket handler is safe for concurrent use.
package broker
