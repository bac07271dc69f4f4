package hooks

import (
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// mochiRefuses is what mochi's own checks of a decoded CONNECT
// (validateConnect, after ParseConnect) make of pk with caps: whether
// mochi would refuse it. badConnect must refuse exactly these, or a valid
// CONNECT is refused (or a bad one reaches OnConnect).
func mochiRefuses(pk packets.Packet, caps *mqtt.Capabilities) bool {
	if pk.ConnectValidate() != packets.CodeSuccess {
		return true
	}
	if pk.ProtocolVersion < 5 && !pk.Connect.Clean && pk.Connect.ClientIdentifier == "" {
		return true
	}
	var willQoS byte
	var willRetain bool
	if pk.Connect.WillFlag {
		willQoS, willRetain = pk.Connect.WillQos, pk.Connect.WillRetain
	}
	return pk.ProtocolVersion < caps.MinimumProtocolVersion || willQoS > caps.MaximumQos ||
		(willRetain && caps.RetainAvailable == 0)
}

// chatCaps are the capabilities badConnect reads, as chatd's broker sets
// them (broker.ServerOptions).
func chatCaps() *mqtt.Capabilities {
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumQos = 1
	caps.RetainAvailable = 0
	caps.MinimumProtocolVersion = 4
	return caps
}

// A CONNECT's body as a client sends it (after the fixed header) is
// decoded by mochi; what it decodes to badConnect refuses exactly when
// mochi's checks would, in the form the CONNECT's level reads: MQTT 5 a v5
// CONNACK, any other a 3.1.1 return code (0x01-0x05) or no CONNACK.
func FuzzBadConnectRefusesWhatMochiWould(f *testing.F) {
	for _, s := range [][]byte{
		append([]byte("\x00\x04MQTT\x04\x02\x00\x1e\x00\x02id"), nil...),
		[]byte("\x00\x04MQTT\x05\xc2\x00\x1e\x00\x00\x02id\x00\x011\x00\x03tok"),
		[]byte("\x00\x04MQTT\x04\x40\x00\x1e\x00\x02id\x00\x03tok"),                                                // a password, no user name (3.1.1 forbids it)
		[]byte("\x00\x04MQTT\x05\x40\x00\x1e\x00\x00\x02id\x00\x00"),                                               // an empty password
		[]byte("\x00\x04MQTT\x05\x2e\x00\x1e\x05\x11\x00\x00\x00\x0a\x00\x02id\x03\x01\x01\x00\x00\x01t\x00\x01x"), // a retained QoS 1 Will with properties
		[]byte("\x00\x04MQTT\x04\x1c\x00\x1e\x00\x02id\x00\x01t\x00\x00"),                                          // Will QoS 3, empty payload
		[]byte("\x00\x06MQIsdp\x03\x02\x00\x1e\x00\x02id"),
		[]byte("\x00\x04MQTT\x04\x01\x00\x1e\x00\x02id"),
		[]byte("\x00\x04MQTT\x04\x00\x00\x1e\x00\x00"),
		[]byte("\x00\x04MQTT\x05"),
		{},
	} {
		f.Add(s)
	}
	caps := chatCaps()
	f.Fuzz(func(t *testing.T, body []byte) {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect, Remaining: len(body)}}
		if err := pk.ConnectDecode(body); err != nil {
			return // mochi closes it before any hook
		}
		emptyPasswordIsNone(&pk)
		r, refused := badConnect(pk, caps)
		if want := mochiRefuses(pk, caps); refused != want {
			t.Fatalf("badConnect refuses %v, mochi would refuse %v: %+v", refused, want, pk.Connect)
		}
		if !refused {
			return
		}
		switch {
		case pk.ProtocolVersion == 5 && r.version != 5:
			t.Fatalf("an MQTT 5 CONNECT refused in the form of version %d", r.version)
		case pk.ProtocolVersion != 5 && r.version == 5:
			t.Fatalf("a level %d CONNECT refused with a v5 CONNACK", pk.ProtocolVersion)
		case r.version == 4 && (r.code.Code == 0 || r.code.Code > 0x05):
			t.Fatalf("a 3.1.1 CONNACK with return code 0x%02x", r.code.Code)
		case r.version == 5 && r.code.Code < 0x80:
			t.Fatalf("a v5 refusal with code 0x%02x", r.code.Code)
		case r.why == "":
			t.Fatal("a refusal without an outcome")
		}
	})
}
