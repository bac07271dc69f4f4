// Package server assembles a whole chatd node from Settings: database
// (embedded or external), migrations, domain service, delivery hub, MQTT
// broker (TCP and WebSocket), HTTP API, Kafka relay and metrics. cmd/chatd is
// a thin main around it, and tests start real nodes in-process with Start,
// in the spirit of nats-server's RunServer.
//
// Operators' side (ops.go): plain and TLS listeners for MQTT and HTTP,
// each optional; one certificate for both TLS listeners, re-read when its
// files change and on ReloadTLS (SIGHUP in cmd/chatd), so live connections
// stay up; device client certificates on the MQTT TLS listener (the CN is
// the user) of the client CAs, less those their CRL revokes, both re-read
// as the certificate is (a removed CA's connections end); PROXY protocol on both MQTT listeners from trusted networks;
// a metrics listener of its own; the identity provider's JWKS; and one log
// line per listener plus the ready line.
//
// With the embedded database a node owns its data dir: Start takes the
// data dir's lock (pgembed.OpenOwner) and fails while another live chatd
// holds it; Close releases it after PostgreSQL stopped. The background
// workers include the refresh of this node's connections in the shared
// per-user connection count (with Redis).
//
// Push (push.go): the VAPID key (set, or kept in the data dir like the JWT
// secret), the device store behind the Service's devices API, and the
// Pusher, which every committed event reaches after the hub (a teed
// publisher; other nodes' message.new through the Kafka consumer) and which
// runs with the background workers until Close.
//
// Start, ReloadTLS and Close are called by one owner goroutine. Close shuts down in
// dependency order: listeners stop accepting, in-flight publishes commit and
// are acknowledged, delivery cursors are flushed, clients are disconnected,
// the relay stops, and PostgreSQL (if embedded) stops last. Close returns
// within its context and CleanupGrace, naming what did not stop in time.
package server
