package hooks

import (
	"errors"
	"strconv"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// announceCapabilities completes a successful MQTT 5 CONNACK with what the
// server really supports. mochi sends Receive Maximum, Maximum QoS and
// Server Keep Alive itself but not the rest, and a v5 client assumes what
// is not announced is available: retained messages, shared and
// subscription-identifier subscriptions, 65,535 topic aliases, packets of
// any size. The values come from the broker's capabilities, so one
// setting decides both what is enforced and what is announced.
func announceCapabilities(caps *mqtt.Capabilities, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || pk.ProtocolVersion != 5 || pk.ReasonCode != packets.CodeSuccess.Code {
		return pk
	}
	p := &pk.Properties
	p.RetainAvailable, p.RetainAvailableFlag = caps.RetainAvailable, true
	p.SharedSubAvailable, p.SharedSubAvailableFlag = caps.SharedSubAvailable, true
	p.WildcardSubAvailable, p.WildcardSubAvailableFlag = caps.WildcardSubAvailable, true
	p.SubIDAvailable, p.SubIDAvailableFlag = caps.SubIDAvailable, true
	p.TopicAliasMaximum = caps.TopicAliasMaximum
	p.MaximumPacketSize = caps.MaximumPacketSize
	p.ReceiveMaximum = caps.ReceiveMaximum
	if caps.MaximumQos < 2 {
		p.MaximumQos, p.MaximumQosFlag = caps.MaximumQos, true
	}
	return pk
}

// announceBodyLimit adds the message body limit to a successful MQTT 5
// CONNACK (user property maxBodyBytes, bytes of UTF-8): a client checks a
// text against it before sending, instead of learning it from a refusal
// (too_large) or working it back from the Maximum Packet Size, which
// leaves room for JSON escapes and the other fields.
func announceBodyLimit(limit int, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Connack || pk.ProtocolVersion != 5 || pk.ReasonCode != packets.CodeSuccess.Code || limit <= 0 {
		return pk
	}
	pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: "maxBodyBytes", Val: strconv.Itoa(limit)})
	return pk
}

// errQoSTooHigh ends a connection that published above the server's
// Maximum QoS.
var errQoSTooHigh = errors.New("publish above the server's maximum QoS")

// refuseQoSAbove ends the connection of a client that publishes at a QoS
// above the server's maximum, instead of mochi's silent downgrade (which
// answers a QoS 2 PUBLISH with a PUBACK the client does not expect). MQTT 5
// prescribes DISCONNECT 0x9B (QoS not supported) [MQTT-3.2.2-11]; MQTT 3.1.1
// has no way to announce a maximum or to say why, so the connection is
// closed, as Mosquitto does for max_qos. It returns ErrRejectPacket, which
// makes mochi stop reading.
func refuseQoSAbove(srv *mqtt.Server, cl *mqtt.Client, pk packets.Packet) error {
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos <= srv.Options.Capabilities.MaximumQos {
		return nil
	}
	if cl.Properties.ProtocolVersion == 5 {
		_ = srv.DisconnectClient(cl, packets.ErrQosNotSupported)
	} else {
		cl.Stop(errQoSTooHigh)
	}
	return packets.ErrRejectPacket
}

// refuseSubscriptionIdentifiers ends the connection of a v5 client whose
// SUBSCRIBE carries a Subscription Identifier although the CONNACK said
// Subscription Identifiers are not available (announceCapabilities): MQTT
// 5 makes that a protocol error (§3.2.2.3.12, §4.13), and 0xA1 says which
// one. mochi checks only the identifier's range, then would grant the
// subscription and keep an identifier no delivery carries. Nothing of the
// SUBSCRIBE is processed. It returns ErrRejectPacket, which makes mochi
// stop reading. (MQTT 3.1.1 has no identifiers: its SUBSCRIBE has no
// properties.)
func refuseSubscriptionIdentifiers(srv *mqtt.Server, cl *mqtt.Client, pk packets.Packet) error {
	if pk.FixedHeader.Type != packets.Subscribe || len(pk.Properties.SubscriptionIdentifier) == 0 ||
		srv.Options.Capabilities.SubIDAvailable != 0 || cl.Properties.ProtocolVersion != 5 {
		return nil
	}
	_ = srv.DisconnectClient(cl, packets.ErrSubscriptionIdentifiersNotSupported)
	return packets.ErrRejectPacket
}

// refuseSharedAsNotSupported gives a v5 client's shared filters, which the
// ACL refuses (SubscribeAllowed), the SUBACK code MQTT 5 has for them,
// 0x9E Shared Subscriptions not supported (§3.9.3), instead of mochi's
// 0x87 not authorized: the CONNACK announced none (announceCapabilities),
// and a client that asks anyway learns it is the feature, not its rights.
// mochi hands OnSubscribed the very codes its SUBACK then carries. MQTT
// 3.1.1 has only 0x80, which mochi has already made of the 0x87. A filter
// is shared by mochi's own test (mqtt.IsSharedFilter), which takes $SHARE
// in any case: these rules cover every filter mochi treats as shared.
func refuseSharedAsNotSupported(cl *mqtt.Client, pk packets.Packet, codes []byte) {
	if cl.Properties.ProtocolVersion != 5 {
		return
	}
	for i, f := range pk.Filters {
		if i < len(codes) && codes[i] == packets.ErrNotAuthorized.Code && mqtt.IsSharedFilter(f.Filter) {
			codes[i] = packets.ErrSharedSubscriptionsNotSupported.Code
		}
	}
}

// refuseSubscribeProtocolErrors ends the connection of a v5 client whose
// SUBSCRIBE MQTT 5 makes a protocol error (DISCONNECT 0x82): one asking for
// Retain Handling 3, a value it does not define (§3.8.3.1), which mochi
// decodes without a check and would grant; one setting No Local on a
// shared subscription [MQTT-3.8.3-4], which mochi answers with SUBACK
// 0x82, no SUBACK code. Nothing of the SUBSCRIBE is processed; it returns
// ErrRejectPacket, which makes mochi stop reading. (A 3.1.1 SUBSCRIBE with
// those bits set is malformed, and mochi closes it.)
func refuseSubscribeProtocolErrors(srv *mqtt.Server, cl *mqtt.Client, pk packets.Packet) error {
	if pk.FixedHeader.Type != packets.Subscribe || cl.Properties.ProtocolVersion != 5 {
		return nil
	}
	for _, sub := range pk.Filters {
		if sub.RetainHandling > 2 || sub.NoLocal && mqtt.IsSharedFilter(sub.Filter) {
			_ = srv.DisconnectClient(cl, packets.ErrProtocolViolation)
			return packets.ErrRejectPacket
		}
	}
	return nil
}
