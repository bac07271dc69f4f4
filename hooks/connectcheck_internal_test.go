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

// breaksMQTT is whether pk (body its bytes after the fixed header)
// breaks a rule of MQTT's that mochi does not check: the Will's QoS or
// retain flag without the Will Flag, an MQTT 5 property that is a
// protocol error. badConnect refuses these too, as malformed.
func breaksMQTT(pk packets.Packet, body []byte) bool {
	if !pk.Connect.WillFlag && (pk.Connect.WillQos != 0 || pk.Connect.WillRetain) {
		return true
	}
	_, bad := connectPropertyError(pk, body)
	return pk.ProtocolVersion == 5 && bad
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
// mochi's checks would or it breaks a rule of MQTT's mochi does not check
// (breaksMQTT), in the form the CONNECT's level reads: MQTT 5 a v5
// CONNACK, any other a 3.1.1 return code (0x01-0x05) or no CONNACK. What
// it refuses that mochi would not is malformed: v5 0x81 or 0x82, 3.1.1
// closed.
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
		[]byte("\x00\x04MQTT\x04\x0a\x00\x1e\x00\x02id"),                             // Will QoS 1 without the Will Flag
		[]byte("\x00\x04MQTT\x05\x02\x00\x1e\x03\x21\x00\x00\x00\x02id"),             // Receive Maximum 0
		[]byte("\x00\x04MQTT\x05\x02\x00\x1e\x05\x27\x00\x00\x00\x00\x00\x02id"),     // Maximum Packet Size 0
		[]byte("\x00\x04MQTT\x05\x02\x00\x1e\x04\x17\x01\x17\x01\x00\x02id"),         // Request Problem Information twice
		[]byte("\x00\x04MQTT\x05\x02\x00\x1e\x02\x19\x02\x00\x02id"),                 // Request Response Information 2
		[]byte("\x00\x04MQTT\x05\x02\x00\x1e\x06\x22\x00\x00\x21\x00\x01\x00\x02id"), // Topic Alias Maximum 0: allowed
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
		r, refused := badConnect(pk, body, caps)
		mochi := mochiRefuses(pk, caps)
		if want := mochi || breaksMQTT(pk, body); refused != want {
			t.Fatalf("badConnect refuses %v, mochi would refuse %v: %+v", refused, mochi, pk.Connect)
		}
		if !refused {
			return
		}
		if !mochi && (r.why != connectMalformed || (r.version == 5 && r.code.Code != 0x81 && r.code.Code != 0x82) || r.version == 4) {
			t.Fatalf("a CONNECT mochi passes refused as %s, code 0x%02x, version %d: want malformed, v5 0x81 or 0x82, 3.1.1 closed", r.why, r.code.Code, r.version)
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

// What mochi lets through of MQTT 5's CONNECT rules is refused as
// malformed, each with its code: the Will's flags without a Will 0x81
// (3.1.1: closed; mochi refused the retain flag alone, as 0x82), a property MQTT 5 makes a protocol error 0x82, read
// from the CONNECT's bytes where mochi's decoding forgets it (a 0 read as
// absent, a repeat as its last). Topic Alias Maximum 0 and repeated User
// Properties are allowed.
func TestConnectBreachesMochiLetsThroughAreRefusedAsMalformed(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		want byte // 0: accepted; 0xff: 3.1.1 closed
	}{
		{"3.1.1 Will QoS without a Will", "\x00\x04MQTT\x04\x0a\x00\x1e\x00\x02id", 0xff},
		{"v5 Will QoS without a Will", "\x00\x04MQTT\x05\x0a\x00\x1e\x00\x00\x02id", 0x81},
		{"v5 Will retain without a Will", "\x00\x04MQTT\x05\x22\x00\x1e\x00\x00\x02id", 0x81},
		{"Receive Maximum 0", "\x00\x04MQTT\x05\x02\x00\x1e\x03\x21\x00\x00\x00\x02id", 0x82},
		{"Maximum Packet Size 0", "\x00\x04MQTT\x05\x02\x00\x1e\x05\x27\x00\x00\x00\x00\x00\x02id", 0x82},
		{"Request Response Information 2", "\x00\x04MQTT\x05\x02\x00\x1e\x02\x19\x02\x00\x02id", 0x82},
		{"Request Problem Information 2", "\x00\x04MQTT\x05\x02\x00\x1e\x02\x17\x02\x00\x02id", 0x82},
		{"Request Problem Information twice", "\x00\x04MQTT\x05\x02\x00\x1e\x04\x17\x01\x17\x01\x00\x02id", 0x82},
		{"Topic Alias Maximum twice", "\x00\x04MQTT\x05\x02\x00\x1e\x06\x22\x00\x01\x22\x00\x01\x00\x02id", 0x82},
		{"Receive Maximum 0 after a User Property", "\x00\x04MQTT\x05\x02\x00\x1e\x0a\x26\x00\x01k\x00\x01v\x21\x00\x00\x00\x02id", 0x82},
		{"Topic Alias Maximum 0, Receive Maximum 1, Maximum Packet Size 1", "\x00\x04MQTT\x05\x02\x00\x1e\x0b\x22\x00\x00\x21\x00\x01\x27\x00\x00\x00\x01\x00\x02id", 0},
		{"User Property twice", "\x00\x04MQTT\x05\x02\x00\x1e\x0e\x26\x00\x01k\x00\x01v\x26\x00\x01k\x00\x01w\x00\x02id", 0},
		{"Request Response and Problem Information 1", "\x00\x04MQTT\x05\x02\x00\x1e\x04\x19\x01\x17\x01\x00\x02id", 0},
	} {
		body := []byte(c.body)
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect, Remaining: len(body)}}
		if err := pk.ConnectDecode(body); err != nil {
			t.Fatalf("%s: mochi does not decode it: %v", c.name, err)
		}
		r, refused := badConnect(pk, body, chatCaps())
		switch {
		case c.want == 0 && refused:
			t.Errorf("%s: refused 0x%02x (%s), want accepted", c.name, r.code.Code, r.code.Reason)
		case c.want == 0:
		case !refused || r.why != connectMalformed:
			t.Errorf("%s: refused %v as %q, want malformed", c.name, refused, r.why)
		case c.want == 0xff && r.version != 0:
			t.Errorf("%s: a 3.1.1 CONNACK 0x%02x, want the connection closed", c.name, r.code.Code)
		case c.want != 0xff && (r.version != 5 || r.code.Code != c.want || r.code.Reason == ""):
			t.Errorf("%s: v%d CONNACK 0x%02x %q, want v5 0x%02x with a reason", c.name, r.version, r.code.Code, r.code.Reason, c.want)
		}
	}
}
