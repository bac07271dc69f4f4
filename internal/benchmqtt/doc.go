// Package benchmqtt is the load generators' MQTT client (cmd/chatbench,
// cmd/connbench): MQTT 3.1.1 and 5 over TCP with mochi's packet codec, one
// reader goroutine per connection (publishes are written by their caller,
// PUBACKs by the reader, a few together when several deliveries arrived
// at once), QoS 1 publishes completed by callback. It is lean on purpose,
// so that the load generator measures the server rather than itself;
// tests and applications use paho.golang or the client package instead.
//
// A Conn is safe for concurrent use: Publish, Subscribe and Disconnect may
// be called from any goroutine; the OnPublish and completion callbacks run
// on the reader goroutine and must not block long, and the packet OnPublish
// gets aliases the read buffer: valid until it returns.
package benchmqtt
