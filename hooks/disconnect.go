package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// withholdV311Disconnect keeps a server DISCONNECT from reaching an MQTT
// 3.1.1 client. 3.1.1 has no DISCONNECT from server to client (a client
// such as mosquitto_sub takes one as a protocol error and gives up instead
// of reconnecting); the server ends a 3.1.1 connection by closing it.
//
// mochi sends DISCONNECT with DisconnectClient whatever the client's
// version: on graceful shutdown (reason 0x8B), on a session takeover
// (0x8E), on a receive maximum overrun. Every such write passes
// OnPacketEncode first; a packet of type Reserved is one WritePacket does
// not encode, so it writes nothing and returns an error, which
// DisconnectClient ignores before it closes the socket as usual.
func withholdV311Disconnect(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type == packets.Disconnect && cl.Properties.ProtocolVersion < 5 {
		pk.FixedHeader.Type = packets.Reserved
	}
	return pk
}
