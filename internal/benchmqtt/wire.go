package benchmqtt

import (
	"bufio"
	"encoding/binary"
	"unicode/utf8"
	"unsafe"

	"github.com/mochi-mqtt/server/v2/packets"
)

// The two packets a load generator sends per message, a QoS 1 PUBLISH
// without properties and a successful PUBACK, are appended here by hand:
// mochi's encoder builds each in two pooled buffers through its property
// checks, which was a tenth of the load generator's CPU. The bytes are
// the ones mochi's encoder writes (TestEncodersWriteWhatMochiWrites);
// every other packet still goes through it.

// appendPublish appends a PUBLISH of payload to topic at qos (packet id
// id when qos > 0); version 5 adds an empty property list.
func appendPublish(dst []byte, version, qos byte, id uint16, topic string, payload []byte) []byte {
	rem := 2 + len(topic) + len(payload)
	if qos > 0 {
		rem += 2
	}
	if version == 5 {
		rem++
	}
	dst = append(dst, 0x30|qos<<1)
	dst = appendLength(dst, rem)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(topic)))
	dst = append(dst, topic...)
	if qos > 0 {
		dst = binary.BigEndian.AppendUint16(dst, id)
	}
	if version == 5 {
		dst = append(dst, 0)
	}
	return append(dst, payload...)
}

// appendPuback appends a successful PUBACK of packet id (the same bytes in
// both versions: v5 omits a success reason code without properties).
func appendPuback(dst []byte, id uint16) []byte {
	return append(dst, 0x40, 2, byte(id>>8), byte(id))
}

// appendLength appends MQTT's variable byte integer.
func appendLength(dst []byte, n int) []byte {
	for {
		b := byte(n % 128)
		n /= 128
		if n > 0 {
			b |= 0x80
		}
		dst = append(dst, b)
		if n == 0 {
			return dst
		}
	}
}

// packetBuffered reports whether r holds a whole packet, so that reading
// it will not block: the reader holds back its PUBACKs until then.
func packetBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 2 {
		return false
	}
	hdr, _ := r.Peek(min(n, 5))
	length, mult := 0, 1
	for i := 1; i < len(hdr); i++ {
		length += int(hdr[i]&0x7f) * mult
		if hdr[i]&0x80 == 0 {
			return n >= i+1+length
		}
		mult *= 128
	}
	return false
}

// peekPublish decodes the PUBLISH at the head of r when the whole packet
// is buffered and (v5) has no properties, the form every delivery of a
// load run has, without copying it: its topic and payload alias r's
// buffer until r is next read. n is the packet's length; ok false leaves
// the packet to mqttwire.Read.
func peekPublish(r *bufio.Reader, version byte) (pk packets.Packet, n int, ok bool) {
	b, _ := r.Peek(r.Buffered())
	if len(b) < 2 || b[0]>>4 != packets.Publish {
		return pk, 0, false
	}
	rem, i, mult := 0, 1, 1
	for ; ; i++ {
		if i >= len(b) || i > 4 {
			return pk, 0, false
		}
		rem += int(b[i]&0x7f) * mult
		if b[i]&0x80 == 0 {
			break
		}
		mult *= 128
	}
	n = i + 1 + rem
	if len(b) < n {
		return pk, 0, false
	}
	if err := pk.FixedHeader.Decode(b[0]); err != nil || pk.FixedHeader.Qos > 1 {
		return pk, 0, false
	}
	pk.FixedHeader.Remaining = rem
	pk.ProtocolVersion = version
	body := b[i+1 : n]
	if len(body) < 2 {
		return pk, 0, false
	}
	tl := int(binary.BigEndian.Uint16(body))
	off := 2 + tl
	if pk.FixedHeader.Qos > 0 {
		off += 2
	}
	if version == 5 {
		off++
	}
	if off > len(body) || (version == 5 && body[off-1] != 0) || !utf8.Valid(body[2:2+tl]) {
		return pk, 0, false
	}
	pk.TopicName = unsafe.String(unsafe.SliceData(body[2:]), tl)
	if pk.FixedHeader.Qos > 0 {
		pk.PacketID = binary.BigEndian.Uint16(body[2+tl:])
	}
	pk.Payload = body[off:]
	return pk, n, true
}
