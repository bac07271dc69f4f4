package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/logtest"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// rawConnect is a CONNECT written byte by byte, as no client library
// writes a wrong one: protocol name, level, connect flags, keep alive
// 30 s, no properties at level 5, then the payload's fields as they are
// given (each one's length prefix included: see str).
func rawConnect(name string, level, flags byte, fields ...[]byte) []byte {
	return rawConnectWith(name, level, flags, nil, fields...)
}

// rawConnectWith is rawConnect with props as the level 5 CONNECT's
// properties (fewer than 128 bytes of them).
func rawConnectWith(name string, level, flags byte, props []byte, fields ...[]byte) []byte {
	vh := append(str(name), level, flags, 0, 30)
	if level == 5 {
		vh = append(append(vh, byte(len(props))), props...) // property length, properties
	}
	for _, f := range fields {
		vh = append(vh, f...)
	}
	hdr := []byte{0x10}
	for n := len(vh); ; { // the remaining length, seven bits a byte
		b := byte(n & 0x7f)
		if n >>= 7; n == 0 {
			hdr = append(hdr, b)
			break
		}
		hdr = append(hdr, b|0x80)
	}
	return append(hdr, vh...)
}

// str is s as an MQTT string or binary field: a two-byte length, then s.
func str(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

// connectFlags of rawConnect.
const (
	flagReserved   = 0x01
	flagClean      = 0x02
	flagWill       = 0x04
	flagWillQoS1   = 0x08
	flagWillQoS2   = 0x10
	flagWillQoS3   = 0x18
	flagWillRetain = 0x20
	flagPassword   = 0x40
	flagUsername   = 0x80
)

// connackOf sends connect on a new connection and returns the CONNACK's
// return code and whether it is one of MQTT 5's form (with properties),
// or closed = true when the server closed the connection without one.
func connackOf(t *testing.T, addr string, connect []byte) (code byte, v5Form, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(connect); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	typ, err := r.ReadByte()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no answer to % x within 10 s", connect)
		}
		return 0, false, true
	}
	n, _, err := packets.DecodeLength(r)
	if err != nil || typ != 0x20 || n < 2 {
		t.Fatalf("answered %02x (length %d, %v) to % x, want a CONNACK", typ, n, err, connect)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("CONNACK cut short: %v", err)
	}
	return body[1], n > 2, false
}

// Every CONNECT the MQTT library used to refuse as a protocol error (0x82,
// whatever was wrong) before chatd looked at it is answered with the code
// MQTT gives its mistake, so the device reacts as it should: a protocol
// name or level chatd does not speak 0x01 unacceptable protocol version
// (v5 0x84), a Will without payload refused as every Will is (0x87 / 0x05),
// a reserved flag or Will QoS 3 a malformed packet (v5 0x81); MQTT 3.1.1
// has no code for those and wants the connection closed without a CONNACK
// [MQTT-3.1.4-1]. None of them is 0x03 "server unavailable" any more, which
// a 3.1.1 device retried for ever, and each is counted by its outcome.
// The cases that passed before (3.1, a QoS 2 or retained Will) are held
// too, and now counted. What mochi let through of MQTT 5's rules is
// refused as malformed too: Will QoS or Will Retain without the Will
// flag (v5 0x81, as the flags byte's other breaches; 3.1.1 closed), and
// the properties MQTT 5 makes a protocol error (0x82): Receive Maximum or
// Maximum Packet Size 0, a request flag other than 0 and 1, a property
// sent twice; the same properties with allowed values connect. A
// CONNECT mochi cannot decode at all, closed unanswered and uncounted
// before, is counted as malformed, and v5 told so (0x81).
func TestEveryConnectRefusedForItsFormGetsTheCodeOfItsMistake(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	tok := testnode.Token(t, 1)
	login := func(level byte, id string) []byte {
		return rawConnect("MQTT", level, flagClean|flagUsername|flagPassword, str(id), str("1"), str(tok))
	}
	// withWill: the payload of a CONNECT with a Will (v5: no Will
	// properties), then the login.
	withWill := func(level byte, id, topic, payload string) [][]byte {
		f := [][]byte{str(id)}
		if level == 5 {
			f = append(f, []byte{0})
		}
		return append(f, str(topic), str(payload), str("1"), str(tok))
	}
	const closed = 0xff // no CONNACK: the connection closed
	for _, c := range []struct {
		name    string
		connect []byte
		want    byte
		wantV5  bool // the CONNACK in MQTT 5's form
		outcome string
	}{
		{"3.1.1 under another protocol name", rawConnect("MQTX", 4, flagClean, str("n4")), 0x01, false, "protocol_version"},
		{"v5 under another protocol name", rawConnect("MQTX", 5, flagClean, str("n5")), 0x84, true, "protocol_version"},
		{"MQTT level 3", rawConnect("MQTT", 3, flagClean, str("l3")), 0x01, false, "protocol_version"},
		{"MQTT level 6", rawConnect("MQTT", 6, flagClean, str("l6")), 0x01, false, "protocol_version"},
		{"MQIsdp level 4", rawConnect("MQIsdp", 4, flagClean, str("i4")), 0x01, false, "protocol_version"},
		{"MQTT 3.1 (MQIsdp level 3)", rawConnect("MQIsdp", 3, flagClean, str("i3")), 0x01, false, "protocol_version"},
		{"3.1.1 reserved flag", rawConnect("MQTT", 4, flagClean|flagReserved, str("r4")), closed, false, "malformed"},
		{"v5 reserved flag", rawConnect("MQTT", 5, flagClean|flagReserved, str("r5")), 0x81, true, "malformed"},
		{"3.1.1 Will QoS 3", rawConnect("MQTT", 4, flagClean|flagWill|flagWillQoS3, withWill(4, "q4", "t", "x")...), closed, false, "malformed"},
		{"v5 Will QoS 3", rawConnect("MQTT", 5, flagClean|flagWill|flagWillQoS3, withWill(5, "q5", "t", "x")...), 0x81, true, "malformed"},
		{"3.1.1 Will retain without a Will", rawConnect("MQTT", 4, flagClean|flagWillRetain, str("w4")), closed, false, "malformed"},
		{"v5 Will retain without a Will", rawConnect("MQTT", 5, flagClean|flagWillRetain, str("w5")), 0x81, true, "malformed"},
		{"3.1.1 Will QoS without a Will", rawConnect("MQTT", 4, flagClean|flagWillQoS1, str("wq4")), closed, false, "malformed"},
		{"v5 Will QoS without a Will", rawConnect("MQTT", 5, flagClean|flagWillQoS1, str("wq5")), 0x81, true, "malformed"},
		{"v5 Will QoS 2 and retain without a Will", rawConnect("MQTT", 5, flagClean|flagWillQoS2|flagWillRetain, str("wr5")), 0x81, true, "malformed"},
		{"v5 Receive Maximum 0", rawConnectWith("MQTT", 5, flagClean, []byte{0x21, 0, 0}, str("rm5")), 0x82, true, "malformed"},
		{"v5 Maximum Packet Size 0", rawConnectWith("MQTT", 5, flagClean, []byte{0x27, 0, 0, 0, 0}, str("mp5")), 0x82, true, "malformed"},
		{"v5 Request Response Information 2", rawConnectWith("MQTT", 5, flagClean, []byte{0x19, 2}, str("rr5")), 0x82, true, "malformed"},
		{"v5 Request Problem Information 2", rawConnectWith("MQTT", 5, flagClean, []byte{0x17, 2}, str("rp5")), 0x82, true, "malformed"},
		{"v5 Receive Maximum twice", rawConnectWith("MQTT", 5, flagClean, []byte{0x21, 0, 10, 0x21, 0, 20}, str("r25")), 0x82, true, "malformed"},
		{"v5 CONNECT mochi cannot read (a Topic Alias in it)", rawConnectWith("MQTT", 5, flagClean, []byte{0x23, 0, 1}, str("ta5")), 0x81, true, "malformed"},
		{"3.1.1 CONNECT mochi cannot read (a client id not UTF-8)", rawConnect("MQTT", 4, flagClean, str("\xff\xfe")), closed, false, "malformed"},
		{"v5 Session Expiry Interval twice", rawConnectWith("MQTT", 5, flagClean, []byte{0x11, 0, 0, 0, 60, 0x11, 0, 0, 0, 60}, str("s25")), 0x82, true, "malformed"},
		{"3.1.1 Will without payload", rawConnect("MQTT", 4, flagClean|flagWill|flagUsername|flagPassword, withWill(4, "e4", "t", "")...), 0x05, false, "will_refused"},
		{"v5 Will without payload", rawConnect("MQTT", 5, flagClean|flagWill|flagUsername|flagPassword, withWill(5, "e5", "t", "")...), 0x87, true, "will_refused"},
		{"3.1.1 Will without topic", rawConnect("MQTT", 4, flagClean|flagWill|flagUsername|flagPassword, withWill(4, "o4", "", "x")...), 0x05, false, "will_refused"},
		{"3.1.1 QoS 2 Will", rawConnect("MQTT", 4, flagClean|flagWill|flagWillQoS2|flagUsername|flagPassword, withWill(4, "k4", "t", "x")...), 0x05, false, "will_refused"},
		{"v5 QoS 2 Will", rawConnect("MQTT", 5, flagClean|flagWill|flagWillQoS2|flagUsername|flagPassword, withWill(5, "k5", "t", "x")...), 0x9b, true, "will_refused"},
		{"v5 retained Will", rawConnect("MQTT", 5, flagClean|flagWill|flagWillQoS1|flagWillRetain|flagUsername|flagPassword, withWill(5, "x5", "t", "x")...), 0x9a, true, "will_refused"},
		{"3.1.1 empty client id, clean session 0", rawConnect("MQTT", 4, flagUsername|flagPassword, str(""), str("1"), str(tok)), 0x02, false, "client_id_invalid"},
	} {
		before := connects(t, srv, c.outcome)
		code, v5Form, isClosed := connackOf(t, srv.MQTTAddr(), c.connect)
		switch {
		case c.want == closed && !isClosed:
			t.Errorf("%s: CONNACK 0x%02x, want the connection closed without one (MQTT 3.1.1 has no code for it)", c.name, code)
		case c.want != closed && isClosed:
			t.Errorf("%s: closed without a CONNACK, want 0x%02x", c.name, c.want)
		case c.want != closed && (code != c.want || v5Form != c.wantV5):
			t.Errorf("%s: CONNACK 0x%02x (v5 form %v), want 0x%02x (v5 form %v)", c.name, code, v5Form, c.want, c.wantV5)
		}
		if n := connects(t, srv, c.outcome) - before; n != 1 {
			t.Errorf(`%s: chat_mqtt_connects_total{outcome=%q} grew by %v, want 1`, c.name, c.outcome, n)
		}
	}
	// The same CONNECTs, well formed, connect: the refusals were their
	// forms' doing.
	for _, level := range []byte{4, 5} {
		if code, _, isClosed := connackOf(t, srv.MQTTAddr(), login(level, fmt.Sprint("fine-", level))); isClosed || code != 0 {
			t.Errorf("a well-formed v%d CONNECT: CONNACK 0x%02x (closed %v), want 0x00", level, code, isClosed)
		}
	}
	// Each of those properties once, with a value MQTT allows (Topic
	// Alias Maximum 0, the default, among them), and User Properties
	// repeated, as MQTT allows them.
	props := []byte{0x22, 0, 0, 0x21, 0, 10, 0x27, 0, 1, 0, 0, 0x19, 1, 0x17, 0, 0x11, 0, 0, 0, 60,
		0x26, 0, 1, 'k', 0, 1, 'v', 0x26, 0, 1, 'k', 0, 1, 'w'}
	fine := rawConnectWith("MQTT", 5, flagClean|flagUsername|flagPassword, props, str("fine-props"), str("1"), str(tok))
	if code, _, isClosed := connackOf(t, srv.MQTTAddr(), fine); isClosed || code != 0 {
		t.Errorf("a v5 CONNECT with allowed properties: CONNACK 0x%02x (closed %v), want 0x00", code, isClosed)
	}
}

// A CONNECT on a connection that is already established is a protocol
// violation mochi ends the connection for [MQTT-3.1.0-2]: it is not a
// first CONNECT to answer. A malformed one (here Will retain without a Will) naming
// another user's client id got a CONNACK on the live connection and
// renamed it to that id, so that its clean-up removed the other user's
// connection from the broker's client list (and was done under that id).
func TestASecondMalformedConnectOnALiveConnectionTouchesNoOtherClient(t *testing.T) {
	t.Parallel()
	srv := startNode(t, pgtest.NewDB(t), nil)
	victim := rawClient(t, srv.MQTTAddr(), 2, "victim-phone", 5, true)
	attacker, _ := dialAs(t, srv.MQTTAddr(), 1, "intruder", 5, true)
	before := connects(t, srv, "malformed")
	if err := attacker.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, WillRetain: true, Keepalive: 30, ClientIdentifier: "victim-phone"}}); err != nil {
		t.Fatal(err)
	}
	testkit.Receive(t, attacker.Done, 10*time.Second, "the connection with a second CONNECT is still open")
	if pk, ok := attacker.ServerDisconnect(); !ok || pk.ReasonCode != packets.ErrProtocolViolationSecondConnect.Code {
		t.Errorf("the second CONNECT ended with DISCONNECT %v (0x%02x), want 0x%02x protocol error", ok, pk.ReasonCode, packets.ErrProtocolViolationSecondConnect.Code)
	}
	// The intruder's connection leaves the client list once cleaned up.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, intruder := srv.Broker.Server.Clients.Get("intruder")
		_, phone := srv.Broker.Server.Clients.Get("victim-phone")
		if !intruder || !phone {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := srv.Broker.Server.Clients.Get("intruder"); ok {
		t.Error("the connection that sent a second CONNECT is still in the broker's client list")
	}
	if cl, ok := srv.Broker.Server.Clients.Get("victim-phone"); !ok || cl.Closed() {
		t.Error("another user's connection left the broker's client list when a connection sent a CONNECT naming its client id")
	}
	if victim.Closed() {
		t.Error("another user's connection closed")
	}
	if n := connects(t, srv, "malformed") - before; n != 0 {
		t.Errorf(`chat_mqtt_connects_total{outcome="malformed"} grew by %v for a second CONNECT, want 0: it is no connect`, n)
	}
}

// The CONNECTs refused for their form are refused before the per-IP
// connect limit and before any token is checked: anyone can send them as
// fast as the network takes them. Each is counted, and logged at debug as
// a rate-limited connect is, never at info: a flood of them must not
// flood the log too.
func TestConnectsRefusedForTheirFormLogNothingAtInfo(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	srv := testnode.Start(t, nodeEnv(t, pgtest.NewDB(t), nil), slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	willQoS2 := rawConnect("MQTT", 5, flagClean|flagWill|flagWillQoS2, str("flood-will"), []byte{0}, str("t"), str("x"))
	emptyID := rawConnect("MQTT", 4, 0, str(""))
	for i := 0; i < 5; i++ {
		for _, connect := range [][]byte{willQoS2, emptyID} {
			if _, _, closed := connackOf(t, srv.MQTTAddr(), connect); closed {
				t.Fatalf("% x: closed without a CONNACK", connect)
			}
		}
	}
	if n := connects(t, srv, "will_refused") + connects(t, srv, "client_id_invalid"); n != 10 {
		t.Errorf("%v of the 10 refusals counted", n)
	}
	if out := logs.String(); strings.Contains(out, "connection refused") {
		t.Errorf("refusals of CONNECTs for their form logged at info:\n%s", out)
	}
}
