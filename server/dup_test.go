package server_test

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
)

// An MQTT 3.1.1 client may send a QoS 1 publish again, DUP set, while it
// waits for its PUBACK. The server answered both copies, two PUBACKs of one
// packet id: the client frees the id at the first and may give it to its
// next publish, which the second then acknowledges whether or not it was
// stored. A retransmission of a publish still waiting for its answer is
// now answered by that answer alone.
func TestARetransmissionOfAPublishStillWaitingForItsAnswerGetsNoPubackOfItsOwn(t *testing.T) {
	for _, v := range []byte{4, 5} {
		srv, conv := startDirect(t, nil)
		conn, err := net.Dial("tcp", srv.MQTTAddr())
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := mqtttest.DialConn(conn, mqtttest.Options{Version: v, ClientID: "dup", Password: testnode.Token(t, 1), Clean: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Drop)
		encode := func(id uint16, dup bool, payload []byte) []byte {
			b, err := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Dup: dup},
				TopicName: testnode.MsgTopic(conv.ID), PacketID: id, Payload: payload, ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		first := testnode.SendPayload(newID(), "first")
		var b []byte
		b = append(b, encode(100, false, first)...)
		b = append(b, encode(100, true, first)...) // the retransmission, read while the send commits
		b = append(b, encode(101, false, testnode.SendPayload(newID(), "second"))...)
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 20*time.Second, "the PUBACK of the second publish", func() bool { return slices.Contains(c.AckOrder(), 101) })
		if got := c.AckOrder(); !slices.Equal(got, []uint16{100, 101}) {
			t.Fatalf("v%d: PUBACKs by packet id %v, want [100 101]: one PUBACK per publish, none for its retransmission", v, got)
		}
		if n := countMessages(t, srv.Pool, conv.ID); n != 2 {
			t.Fatalf("v%d: %d messages stored, want 2", v, n)
		}
	}
}
