package hooks

import (
	"fmt"

	"github.com/mochi-mqtt/server/v2/packets"
)

// connectPropertyError is the protocol error (0x82) of an MQTT 5 CONNECT's
// properties that mochi accepts (MQTT 5 §3.1.2.11), ok = false when there
// is none: Request Response or Request Problem Information other than 0
// and 1, read from pk; Receive Maximum or Maximum Packet Size 0, and a
// property other than the User Property sent twice, read from body (the
// CONNECT after its fixed header; nil: not checked), since mochi decodes
// a 0 of those two as their absence and keeps the last of a repeat.
func connectPropertyError(pk packets.Packet, body []byte) (packets.Code, bool) {
	if v := pk.Properties.RequestResponseInfo; v > 1 {
		return protocolError(fmt.Sprintf("Request Response Information is %d, not 0 or 1", v)), true
	}
	if v := pk.Properties.RequestProblemInfo; pk.Properties.RequestProblemInfoFlag && v > 1 {
		return protocolError(fmt.Sprintf("Request Problem Information is %d, not 0 or 1", v)), true
	}
	return rawPropertyError(body)
}

// protocolError is a CONNACK 0x82 protocol error saying why.
func protocolError(why string) packets.Code {
	return packets.Code{Code: packets.ErrProtocolViolation.Code, Reason: "protocol error: " + why}
}

// connectPropertyNames are the properties a CONNECT may hold (mochi
// refuses any other before a hook sees the packet), by identifier.
var connectPropertyNames = map[byte]string{
	packets.PropSessionExpiryInterval: "Session Expiry Interval",
	packets.PropReceiveMaximum:        "Receive Maximum",
	packets.PropMaximumPacketSize:     "Maximum Packet Size",
	packets.PropTopicAliasMaximum:     "Topic Alias Maximum",
	packets.PropRequestResponseInfo:   "Request Response Information",
	packets.PropRequestProblemInfo:    "Request Problem Information",
	packets.PropUser:                  "User Property",
	packets.PropAuthenticationMethod:  "Authentication Method",
	packets.PropAuthenticationData:    "Authentication Data",
}

// rawPropertyError walks the properties of body, an MQTT 5 CONNECT after
// its fixed header, for what mochi's decoding cannot show. mochi decoded
// the same bytes without error before the hook runs, so a body that does
// not walk (cut short, a property a CONNECT does not have) is left to
// mochi: ok = false.
func rawPropertyError(body []byte) (code packets.Code, ok bool) {
	if len(body) < 2 {
		return code, false
	}
	// Protocol name, level, connect flags, keep alive, then the
	// properties' length.
	off := 2 + (int(body[0])<<8 | int(body[1])) + 1 + 1 + 2
	if off >= len(body) {
		return code, false
	}
	n, used := varInt(body[off:])
	off += used
	end := off + n
	if used == 0 || end > len(body) {
		return code, false
	}
	var seen [64]bool
	for off < end {
		id := body[off]
		off++
		name, known := connectPropertyNames[id]
		if !known {
			return code, false
		}
		var size int
		switch id {
		case packets.PropRequestResponseInfo, packets.PropRequestProblemInfo:
			size = 1
		case packets.PropReceiveMaximum, packets.PropTopicAliasMaximum:
			size = 2
		case packets.PropSessionExpiryInterval, packets.PropMaximumPacketSize:
			size = 4
		case packets.PropAuthenticationMethod, packets.PropAuthenticationData:
			size = lengthPrefixed(body[off:end], 1)
		case packets.PropUser:
			size = lengthPrefixed(body[off:end], 2)
		}
		if size < 0 || off+size > end {
			return code, false
		}
		v := body[off : off+size]
		off += size
		if id != packets.PropUser && seen[id] {
			return protocolError(fmt.Sprintf("%s (property 0x%02x) sent more than once", name, id)), true
		}
		seen[id] = true
		switch {
		case id == packets.PropReceiveMaximum && v[0]|v[1] == 0:
			return protocolError("Receive Maximum is 0; leave it out for the default, 65535"), true
		case id == packets.PropMaximumPacketSize && v[0]|v[1]|v[2]|v[3] == 0:
			return protocolError("Maximum Packet Size is 0; leave it out for no limit"), true
		}
	}
	return code, false
}

// varInt decodes the variable byte integer b starts with, in at most
// four bytes, without the allocation of packets.DecodeLength's reader (it
// runs for every MQTT 5 CONNECT); used = 0 when b holds none.
func varInt(b []byte) (n, used int) {
	for i, shift := 0, 0; i < len(b) && i < 4; i, shift = i+1, shift+7 {
		n |= int(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return n, i + 1
		}
	}
	return 0, 0
}

// lengthPrefixed is the size of the first count fields of b that are
// each a two-byte length and as many bytes; -1 when b is shorter.
func lengthPrefixed(b []byte, count int) int {
	size := 0
	for range count {
		if len(b) < size+2 {
			return -1
		}
		size += 2 + (int(b[size])<<8 | int(b[size+1]))
	}
	return size
}
