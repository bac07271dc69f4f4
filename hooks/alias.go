package hooks

import (
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// TopicAliasMaximum is the highest topic alias a client may set (announced
// in CONNACK; a higher one gets DISCONNECT 0x94). Chat has a handful of
// publish topics per conversation, so a few aliases cover a client's
// traffic; each one holds its topic for the connection's life.
const TopicAliasMaximum = 16

// MaxTopicLength bounds the topics and filters the server keeps: no chat
// topic comes near it (the longest, chat/v1/rpc/ with a 64-byte method, is
// 76 bytes), and a subscription filter is held for a persistent session's
// life. Longer publish topics are refused as not allowed, longer filters
// as not authorized.
const MaxTopicLength = 256

// publishTopicAllowed is the publish ACL on the topic alone: one of the
// topics ParseTopic routes. Membership and the rest are the domain's, in
// OnPublish.
func publishTopicAllowed(topic string) bool {
	return len(topic) <= MaxTopicLength && ParseTopic(topic).Kind != RouteInvalid
}

// refuseInvalidAlias ends the connection of a client (only v5 has aliases)
// that publishes with a topic alias MQTT 5 forbids, before anything is
// processed (§3.3.2.3.4, §4.13): an alias of 0 or above the announced
// maximum is DISCONNECT 0x94 [MQTT-3.3.2-8] [MQTT-3.3.2-9], an empty topic
// with an alias this connection never set is DISCONNECT 0x82, a protocol
// error. mochi would resolve the unknown alias to an empty topic, refused
// as not allowed (PUBACK 0x87), and the client would go on believing in an
// alias the server does not know. It returns ErrRejectPacket, which makes
// mochi stop reading.
func refuseInvalidAlias(srv *mqtt.Server, cl *mqtt.Client, pk packets.Packet) error {
	if !pk.Properties.TopicAliasFlag {
		return nil
	}
	var code packets.Code
	switch alias := pk.Properties.TopicAlias; {
	case alias == 0 || alias > srv.Options.Capabilities.TopicAliasMaximum:
		code = packets.ErrTopicAliasInvalid
	case pk.TopicName == "" && cl.State.TopicAliases.Inbound.Set(alias, "") == "":
		// Set with an empty topic is a lookup; it records an unknown
		// alias as empty, which the connection ends with.
		code = packets.ErrProtocolViolation
	default:
		return nil
	}
	_ = srv.DisconnectClient(cl, code)
	return packets.ErrRejectPacket
}

// refusedAliasTopic is what an alias stands for once a publish refused
// for its topic set it: later publishes by the alias are refused as that
// topic was (no route has it), while the server holds nothing of the topic.
// No topic from the wire contains U+0000 [MQTT-4.7.3-2].
const refusedAliasTopic = "\x00"

// dropRefusedAlias keeps mochi from recording a topic alias for a topic the
// publish will be refused for, and records the alias as refusedAliasTopic
// instead. mochi records the alias in processPublish after the write ACL
// (which admits every publish, see OnACLCheck) and before OnPublish refuses
// it, so without this a client could make the server hold up to
// TopicAliasMaximum topics of up to a packet's size each. The alias still
// replaces what it stood for (§3.3.2.3.4): a later publish by it must not
// reach the topic it was set to before. The publish itself goes on
// without the alias and gets its refusal (v5 PUBACK 0x87).
func dropRefusedAlias(cl *mqtt.Client, pk *packets.Packet) {
	if pk.Properties.TopicAlias > 0 && pk.TopicName != "" && !publishTopicAllowed(pk.TopicName) {
		cl.State.TopicAliases.Inbound.Set(pk.Properties.TopicAlias, refusedAliasTopic)
		pk.Properties.TopicAlias = 0
		pk.Properties.TopicAliasFlag = false
	}
}

// copyAliasTopic makes the topic a publish sets an alias for a copy of its
// own. mochi decodes the topic as a view into the whole packet, payload
// included, and the alias keeps it for the connection's life: 16 aliases
// set by publishes near the Maximum Packet Size held 2.5 MiB a connection,
// where each should hold a topic of at most MaxTopicLength bytes. Only a
// publish that sets an alias pays for the copy.
func copyAliasTopic(pk *packets.Packet) {
	if pk.Properties.TopicAlias > 0 && pk.TopicName != "" {
		pk.TopicName = strings.Clone(pk.TopicName)
	}
}

// forgetAliases drops a connection's inbound topic aliases when it ends:
// they live for one network connection [MQTT-3.3.2-7], but mochi keeps
// them on the client of a parked persistent session until it expires. It
// runs on the client's read goroutine after its last packet, the only
// goroutine that uses them.
func forgetAliases(cl *mqtt.Client) {
	cl.State.TopicAliases.Inbound = mqtt.NewInboundTopicAliases(TopicAliasMaximum)
}
