package hooks

import (
	"fmt"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// mochi refuses a CONNECT that fails its own checks (packets.
// ConnectValidate and those of its validateConnect) before any hook but
// OnPacketRead runs, uncounted, and as a protocol error 0x82 whatever was
// wrong: for a 3.1.1 client, whose return codes stop at 0x05, that becomes
// 0x03 server unavailable, "try again later", and a device would retry the
// same CONNECT for ever. badConnect makes the same checks first and
// refuseBadConnect answers each with the code MQTT gives that mistake,
// counted by outcome:
//
//   - a protocol name or level chatd does not speak: 0x01 unacceptable
//     protocol version [MQTT-3.1.2-2] (v5, level 5: 0x84);
//   - a 3.1.1 empty client id with clean session 0: 0x02 identifier
//     rejected [MQTT-3.1.3-8];
//   - a Will, even one without payload or topic (mochi's protocol
//     error): refused as every Will is (will.go), a retained one 0x9A
//     and a QoS 2 one 0x9B (v5) as mochi does;
//   - the reserved flag set or a Will QoS of 3, malformed packets
//     [MQTT-3.1.2-3] [MQTT-3.1.2-12]: v5 0x81, and any other breach of
//     the CONNECT's rules v5 0x82 as mochi answers it; MQTT 3.1.1 has no
//     code for these and wants the connection closed without a CONNACK
//     [MQTT-3.1.4-1], which is what a 3.1.1 client gets.
//
// Then the breaches mochi lets through, which a device would otherwise
// come to rely on, refused the same way (outcome malformed):
//
//   - Will QoS or Will Retain set without the Will Flag [MQTT-3.1.2-11]
//     [MQTT-3.1.2-13] (mochi checks the retain alone, as a protocol
//     error): v5 0x81, as the flags byte's other breaches, the reserved
//     flag and Will QoS 3, which MQTT 5 names malformed; 3.1.1 closed;
//   - v5 properties MQTT 5 makes a protocol error (§3.1.2.11), 0x82:
//     Receive Maximum or Maximum Packet Size 0, Request Response or
//     Request Problem Information other than 0 and 1, and any property
//     but the User Property sent twice. mochi's decoding keeps no trace
//     of a 0 sent (it reads as absent) or of a repeat (the last wins), so
//     these are read from the CONNECT's own bytes, which the broker's
//     connection keeps until this hook takes them (connectPacketConn).
//     Topic Alias Maximum 0 is allowed: it is the default.
//
// A CONNECT mochi cannot decode at all (a truncated field, a client id
// that is not UTF-8) never reaches a hook: mochi closes it unanswered.
// The broker's connection, which finds it untaken by this hook when
// mochi closes it and decodes it then as mochi did, answers a v5 one
// with CONNACK 0x81 first and counts it (CountUnreadableConnect).

// connectRefusal is badConnect's verdict on a CONNECT.
type connectRefusal struct {
	code packets.Code
	why  connectOutcome
	// version is the protocol version the CONNACK is written in (4: the
	// 3.1.1 form, code one of 0x01-0x05); 0: none is written, the
	// connection is closed.
	version byte
}

// Reason strings of the malformed CONNECTs a v5 client is told about.
var (
	errConnectReservedFlag = packets.Code{Code: packets.ErrMalformedPacket.Code, Reason: "malformed packet: the CONNECT's reserved flag is not 0"}
	errConnectWillQoS3     = packets.Code{Code: packets.ErrMalformedPacket.Code, Reason: "malformed packet: Will QoS 3"}
	errConnectVersion      = packets.Code{Code: packets.ErrUnsupportedProtocolVersion.Code, Reason: "unsupported protocol version: connect with MQTT 3.1.1 or 5"}
	errConnectWillFlags    = packets.Code{Code: packets.ErrMalformedPacket.Code, Reason: "malformed packet: Will QoS or Will Retain set without the Will Flag"}
)

// connectPacketConn is a connection that kept its CONNECT's body, the
// bytes after the fixed header (the broker's connections do), and gives
// it up once: nil when it has none.
type connectPacketConn interface{ ConnectPacket() []byte }

// badConnect returns how to refuse pk, the CONNECT as it came (its
// empty password made none: emptyPasswordIsNone), and ok = false when
// mochi's own checks, made with caps, and MQTT's rules mochi does not
// check pass it. body is pk's bytes after the fixed header (nil: not
// kept, the properties' checks that need them are skipped). The order
// is mochi's, MQTT's own rules after mochi's packet checks.
func badConnect(pk packets.Packet, body []byte, caps *mqtt.Capabilities) (r connectRefusal, ok bool) {
	v5 := pk.ProtocolVersion == 5
	// answer is a CONNACK with code, or its 3.1.1 return code: a level
	// chatd does not know gets the 3.1.1 form, which every MQTT client
	// reads [MQTT-3.1.2-2].
	answer := func(code, v3 packets.Code, why connectOutcome) (connectRefusal, bool) {
		if v5 {
			return connectRefusal{code: code, why: why, version: 5}, true
		}
		return connectRefusal{code: v3, why: why, version: 4}, true
	}
	// A mistake MQTT 3.1.1 has no code for: v5 code, 3.1.1 closed.
	malformed := func(code packets.Code) (connectRefusal, bool) {
		if v5 {
			return connectRefusal{code: code, why: connectMalformed, version: 5}, true
		}
		return connectRefusal{why: connectMalformed}, true
	}
	switch code := pk.ConnectValidate(); code {
	case packets.CodeSuccess:
	case packets.ErrProtocolViolationProtocolName, packets.ErrProtocolViolationProtocolVersion:
		return answer(errConnectVersion, packets.Err3UnsupportedProtocolVersion, connectProtocolVersion)
	case packets.ErrProtocolViolationWillFlagNoPayload:
		return answer(willRefusal, packets.Err3NotAuthorized, connectWillRefused)
	case packets.ErrProtocolViolationReservedBit:
		return malformed(errConnectReservedFlag)
	case packets.ErrProtocolViolationQosOutOfRange:
		return malformed(errConnectWillQoS3)
	case packets.ErrClientIdentifierNotValid:
		return answer(packets.ErrClientIdentifierNotValid, packets.Err3ClientIdentifierNotValid, connectClientIDInvalid)
	case packets.ErrProtocolViolationWillFlagSurplusRetain:
		return malformed(errConnectWillFlags)
	default:
		return malformed(code)
	}
	if !pk.Connect.WillFlag && pk.Connect.WillQos != 0 {
		return malformed(errConnectWillFlags)
	}
	if v5 {
		if code, bad := connectPropertyError(pk, body); bad {
			return connectRefusal{code: code, why: connectMalformed, version: 5}, true
		}
	}
	switch {
	case !v5 && !pk.Connect.Clean && pk.Connect.ClientIdentifier == "":
		return answer(packets.ErrClientIdentifierNotValid, packets.Err3ClientIdentifierNotValid, connectClientIDInvalid)
	case pk.ProtocolVersion < caps.MinimumProtocolVersion:
		return answer(errConnectVersion, packets.Err3UnsupportedProtocolVersion, connectProtocolVersion)
	case pk.Connect.WillFlag && pk.Connect.WillQos > caps.MaximumQos:
		return answer(packets.ErrQosNotSupported, packets.Err3NotAuthorized, connectWillRefused)
	case pk.Connect.WillFlag && pk.Connect.WillRetain && caps.RetainAvailable == 0:
		return answer(packets.ErrRetainNotSupported, packets.Err3NotAuthorized, connectWillRefused)
	}
	return connectRefusal{}, false
}

// errBadConnect ends a connection whose CONNECT refuseBadConnect refused:
// it wraps packets.ErrRejectPacket, the one error of OnPacketRead that
// mochi acts on (it stops reading and closes the connection).
var errBadConnect = fmt.Errorf("CONNECT refused before mochi's checks: %w", packets.ErrRejectPacket)

// refuseBadConnect answers a CONNECT badConnect refuses and returns
// errBadConnect, or nil when the CONNECT goes on to mochi's handling and
// OnConnect. It runs before mochi parsed the CONNECT into cl: it gives cl
// the protocol version its CONNACK is written in and the client id the
// log names. Only a connection's first CONNECT is its to answer (OnConnect
// has not accepted one: cl has no record here): a CONNECT on an
// established connection is a protocol violation mochi ends the
// connection for [MQTT-3.1.0-2], and answering it here would write a
// CONNACK on a live connection and rename the client to whatever id the
// CONNECT names, so that mochi's clean-up of it removed the client of
// that id, another user's maybe, from its client list.
func (h *Chat) refuseBadConnect(cl *mqtt.Client, pk packets.Packet) error {
	var body []byte
	if c, ok := cl.Net.Conn.(connectPacketConn); ok {
		body = c.ConnectPacket() // taken whatever follows: it is kept until then
	}
	if h.info(cl) != nil {
		return nil
	}
	r, ok := badConnect(pk, body, h.server.Options.Capabilities)
	if !ok {
		return nil
	}
	cl.ID = pk.Connect.ClientIdentifier
	cl.Properties.ProtocolVersion = r.version
	// Logged at debug whatever the outcome (a Will or a client id
	// refused after OnConnect is logged at info): these come before the
	// per-IP connect limit and any token check, so anyone can send them
	// as fast as the network takes them. The counter shows a flood.
	h.cfg.Metrics.Connects.WithLabelValues(string(r.why)).Inc()
	if r.version == 0 {
		h.cfg.Logger.Debug("connection refused", "client", truncatedID(cl.ID), "remote", cl.Net.Remote, "reason", r.why,
			"protocol_version", pk.ProtocolVersion, "closed", "MQTT 3.1.1 has no CONNACK code for it")
		return errBadConnect
	}
	h.cfg.Logger.Debug("connection refused", "client", truncatedID(cl.ID), "remote", cl.Net.Remote, "reason", r.why,
		"protocol_version", pk.ProtocolVersion)
	_ = h.server.SendConnack(cl, r.code, false, nil)
	return errBadConnect
}

// truncatedID is a client id as logged: at most MaxClientIDLength bytes.
func truncatedID(id string) string {
	if len(id) > MaxClientIDLength {
		return id[:MaxClientIDLength] + "…"
	}
	return id
}

// quietRefusal is whether a refusal is logged at debug: a flood of them
// must not flood the log too (counted in chat_mqtt_connects_total; rate
// limits in chat_rate_limited_total too). A CONNECT that breaks MQTT's
// rules is most often no MQTT client's (a port scanner's).
func quietRefusal(why connectOutcome) bool {
	return why == connectRateLimited || why == connectBusy || why == connectMalformed || why == connectProtocolVersion
}
