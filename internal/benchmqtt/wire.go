package benchmqtt

import (
	"bufio"
	"encoding/binary"
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
