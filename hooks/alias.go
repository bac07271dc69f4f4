package hooks

import (
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

// dropRefusedAlias keeps mochi from recording a topic alias for a topic the
// publish will be refused for. mochi records the alias in processPublish
// after the write ACL (which admits every publish, see OnACLCheck) and
// before OnPublish refuses it, so without this a client could make the
// server hold up to TopicAliasMaximum topics of up to a packet's size each,
// and a parked persistent session keeps them. The publish itself goes on
// without the alias and gets its refusal (v5 PUBACK 0x87, else an error
// event).
func dropRefusedAlias(pk *packets.Packet) {
	if pk.Properties.TopicAlias > 0 && pk.TopicName != "" && !publishTopicAllowed(pk.TopicName) {
		pk.Properties.TopicAlias = 0
		pk.Properties.TopicAliasFlag = false
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
