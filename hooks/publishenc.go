package hooks

import (
	"bytes"

	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// encodePublish appends p to buf as an MQTT PUBLISH packet for a client of
// the given protocol version, byte for byte what mochi's
// packets.Packet.PublishEncode writes for the same packet (no dup, no
// retain, the only property CorrelationData).
//
// Why not PublishEncode: in CPU profiles of fan-out, mochi's generic
// Properties.Encode, which asks canEncode (two map lookups) for each of the
// ~30 properties of every packet, plus its pooled scratch buffers and
// per-field slices, took about a tenth of the server's CPU. This encoder
// writes straight into buf and allocates nothing once buf has grown.
//
// What Properties.Encode emits for our PUBLISH: CorrelationData only when
// non-empty (an empty, non-nil slice emits nothing); the Mods mochi's
// Client.WritePacket sets (MaxSize, DisallowProblemInfo) only gate
// ReasonString and User properties, which we never set, and AllowResponseInfo only lets
// CorrelationData through. v5 always has the properties length, 0 if none.
// Like mochi, lengths above 65535 are truncated to 16 bits in their
// prefixes; chatd's topics and correlation data are far shorter.
// TestEncodePublishMatchesMochi and FuzzPublishEncode hold it to mochi.
func encodePublish(buf *bytes.Buffer, p *chat.Packet, protocolVersion byte) error {
	// Variable header: topic name, packet id when QoS > 0.
	remaining := 2 + len(p.Topic)
	if p.QoS > 0 {
		if p.PacketID == 0 {
			return packets.ErrProtocolViolationNoPacketID // [MQTT-2.2.1-2]
		}
		remaining += 2
	}
	props := 0
	if protocolVersion == 5 {
		if len(p.CorrelationData) > 0 {
			props = 1 + 2 + len(p.CorrelationData)
		}
		remaining += varintLen(props) + props
	}
	remaining += len(p.Payload)

	buf.Grow(1 + varintLen(remaining) + remaining)
	buf.WriteByte(packets.Publish<<4 | p.QoS<<1)
	writeVarint(buf, remaining)
	writeUint16(buf, len(p.Topic))
	buf.WriteString(p.Topic)
	if p.QoS > 0 {
		writeUint16(buf, int(p.PacketID))
	}
	if protocolVersion == 5 {
		writeVarint(buf, props)
		if props > 0 {
			buf.WriteByte(packets.PropCorrelationData)
			writeUint16(buf, len(p.CorrelationData))
			buf.Write(p.CorrelationData)
		}
	}
	buf.Write(p.Payload)
	return nil
}

// writeUint16 writes n's low 16 bits big-endian, as mochi's encodeString,
// encodeBytes and encodeUint16 do.
func writeUint16(buf *bytes.Buffer, n int) {
	buf.WriteByte(byte(n >> 8))
	buf.WriteByte(byte(n))
}

// writeVarint writes n as an MQTT Variable Byte Integer, as mochi's
// encodeLength does (n >= 0).
func writeVarint(buf *bytes.Buffer, n int) {
	for n >= 0x80 {
		buf.WriteByte(byte(n) | 0x80)
		n >>= 7
	}
	buf.WriteByte(byte(n))
}

// varintLen is the number of bytes writeVarint writes for n.
func varintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}
