package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// chatd offers no MQTT 5 enhanced authentication (§4.12): a connection
// authenticates with the JWT in its password or its client certificate.

// authMethodReason is the reason string of a CONNACK refusing a CONNECT
// that names an Authentication Method.
const authMethodReason = "enhanced authentication is not supported: connect without an Authentication Method, with the token as the password"

// refuseAuthMethod returns the CONNACK code for a v5 CONNECT that names an
// Authentication Method, and ok = false when it names none. A server that
// does not support the method must close the connection, after a CONNACK
// 0x8C bad authentication method or 0x87 [MQTT-4.12.0-1]: admitting the
// client by its password instead would leave it waiting for an exchange
// that never comes, or believing it was authenticated by its method.
// MQTT 3.1.1 has no Authentication Method.
func refuseAuthMethod(cl *mqtt.Client) (packets.Code, bool) {
	if !isV5(cl) || cl.Properties.Props.AuthenticationMethod == "" {
		return packets.Code{}, false
	}
	return packets.Code{Code: packets.ErrBadAuthenticationMethod.Code, Reason: authMethodReason}, true
}

// OnAuthPacket ends the connection of a client that sends AUTH. Every
// connection chatd admits connected without an Authentication Method
// (refuseAuthMethod), and a client that did not name one must not send
// AUTH [MQTT-4.12.0-7]: a protocol error, DISCONNECT 0x82 (§4.13), which
// mochi sends for the code returned (v5 only: 3.1.1, where the packet
// type is reserved, is closed without one). mochi calls no other hook
// for AUTH and otherwise ignores it, leaving a client that started a
// re-authentication waiting.
func (h *Chat) OnAuthPacket(_ *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	return pk, packets.ErrProtocolViolation
}

// emptyPasswordIsNone makes the empty password of a CONNECT (the password
// flag set, zero bytes: a client whose stored token is empty) no password
// at all, so that the CONNECT is refused as every bad token is (v5 0x86,
// 3.1.1 0x05), or admitted by its client certificate. mochi refuses it
// before any hook sees the CONNECT as a protocol error (v5 0x82, and for
// 3.1.1, which has no such code, 0x03 server unavailable: try again
// later), though MQTT's password is Binary Data, which may be empty.
func emptyPasswordIsNone(pk *packets.Packet) {
	if pk.Connect.PasswordFlag && len(pk.Connect.Password) == 0 {
		pk.Connect.PasswordFlag = false
	}
}
