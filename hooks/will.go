package hooks

import (
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// willReason is the reason string of a CONNACK refusing a Will.
const willReason = "Will messages are not supported: the server never publishes one (presence reports a device that went away); connect without a Will"

// willRefusal is the v5 CONNACK code refusing a Will.
var willRefusal = packets.Code{Code: packets.ErrNotAuthorized.Code, Reason: willReason}

// refuseWill returns the CONNACK code for a CONNECT that carries a Will,
// and ok = false when it carries none.
//
// Chat has no Will semantics, and mochi's Will path publishes straight to
// subscribers, bypassing OnPublish and the publish ACL: a user could make
// a forged event appear in anyone's events topic. Like Mosquitto with a
// Will topic its ACL denies, the server refuses the CONNECT as not
// authorized (v5 0x87, 3.1.1 0x05) instead of dropping the Will silently,
// so a client that relies on its Will learns at once that it has none.
// chat's Will ACL admits no topic: a Will on a chat topic would not go
// through the domain either.
func refuseWill(cl *mqtt.Client, pk packets.Packet) (packets.Code, bool) {
	if !pk.Connect.WillFlag && cl.Properties.Will.Flag == 0 {
		return packets.Code{}, false
	}
	if isV5(cl) {
		return willRefusal, true
	}
	return packets.Err3NotAuthorized, true
}

// clearWill forgets any Will mochi parsed from the CONNECT, so that none of
// mochi's Will paths (a dropped socket, a second CONNECT, a session
// takeover, the Will Delay timer) can publish one.
func clearWill(cl *mqtt.Client) {
	cl.Properties.Will = mqtt.Will{}
}

// v311ConnackCodes maps the CONNACK refusals sent with MQTT 5 codes
// (server busy, 0x89; chat's: an invalid client id, 0x85) to the 3.1.1
// return codes, which are 0x00-0x05 only: a busy server is unavailable, an
// invalid client id is identifier rejected. A refused Will (mochi's 0x9A
// retain, 0x9B QoS 2) is not authorized, though refuseBadConnect answers
// those before mochi would.
var v311ConnackCodes = map[byte]byte{
	packets.ErrRetainNotSupported.Code: packets.Err3NotAuthorized.Code,
	packets.ErrQosNotSupported.Code:    packets.Err3NotAuthorized.Code,
	packets.ErrServerBusy.Code:         packets.Err3ServerUnavailable.Code,
	// A client id over MaxClientIDLength.
	packets.ErrClientIdentifierNotValid.Code: packets.Err3ClientIdentifierNotValid.Code,
}

// v311Connack rewrites a CONNACK to a 3.1.1 client whose return code is not
// a 3.1.1 one (see v311ConnackCodes; anything else unknown is 0x03).
func v311Connack(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || cl.Properties.ProtocolVersion >= 5 || pk.ReasonCode <= packets.Err3NotAuthorized.Code {
		return pk
	}
	if c, ok := v311ConnackCodes[pk.ReasonCode]; ok {
		pk.ReasonCode = c
	} else {
		pk.ReasonCode = packets.Err3ServerUnavailable.Code
	}
	return pk
}

// withoutWill makes a DISCONNECT 0x04 (disconnect with Will message) the
// normal disconnect it is for a chat connection, which never has a Will
// (a CONNECT with one is refused): mochi returns 0x04 from its DISCONNECT
// handling as an error, logged at WARN for every client that sends it.
func withoutWill(pk *packets.Packet) {
	if pk.ReasonCode == packets.CodeDisconnectWillMessage.Code {
		pk.ReasonCode = packets.CodeDisconnect.Code
	}
}
