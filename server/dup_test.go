package server_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// An MQTT 3.1.1 client may send a QoS 1 publish again, DUP set, while it
// waits for its PUBACK. The server answered both copies, two PUBACKs of one
// packet id: the client frees the id at the first and may give it to its
// next publish, which the second then acknowledges whether or not it was
// stored. A retransmission of a publish still waiting for its answer is
// now answered by that answer alone.
func TestARetransmissionOfAPublishStillWaitingForItsAnswerGetsNoPubackOfItsOwn(t *testing.T) {
	t.Parallel()
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

// The same retransmission read after the first one's answer was handed
// to the connection's delivery session, and before the session could
// write it (the client reads nothing meanwhile and its socket is full of
// deliveries), took a place of its own and got a PUBACK of its own: two
// PUBACKs of one packet id again. The answer not written yet is its answer
// too; only once it is written (MQTT 3.1.1 §4.3.2) is a publish with the
// id a new one.
func TestARetransmissionReadWhileItsAnswerWaitsToBeWrittenGetsNoPubackOfItsOwn(t *testing.T) {
	t.Parallel()
	for _, v := range []byte{4, 5} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			srv, conv := startDirect(t, map[string]string{"CHAT_MAX_BODY_BYTES": "262144"})
			const id = "dup-unwritten"
			c, _, err := mqtttest.Dial(srv.MQTTAddr(), mqtttest.Options{Version: v, ClientID: id, Password: testnode.Token(t, 1), Clean: true, NoAutoAck: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Drop)
			if codes, err := c.Subscribe(testnode.EventsTopic(1)); err != nil || codes[0] >= 0x80 {
				t.Fatalf("subscribe: %v %v", codes, err)
			}
			testkit.WaitFor(t, 10*time.Second, "the session to deliver", func() bool { return srv.Hub.Ready(id) })
			c.HoldReading()
			// 40 deliveries of 250 KiB, 10 MiB: far more than the socket
			// holds (the server's send buffer grows to 4 MiB at most, and
			// the client's receive buffer grows only as it reads), so the
			// session's write blocks until the client reads.
			body := strings.Repeat("x", 250<<10)
			for range 40 {
				mustSendAs(t, srv, conv.ID, 2, body)
			}
			// A second without a new delivery: the session's write is
			// blocked, and what it writes next waits behind it.
			var last float64
			stable := 0
			testkit.WaitFor(t, 60*time.Second, "the session to stop writing deliveries", func() bool {
				n := counterValue(t, srv, "chat_deliveries_total")
				if n > 0 && n == last {
					stable++
				} else {
					stable = 0
				}
				last = n
				time.Sleep(100 * time.Millisecond)
				return stable >= 10
			})
			encode := func(packetID uint16, dup bool, payload []byte) packets.Packet {
				return packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Dup: dup},
					TopicName: testnode.MsgTopic(conv.ID), PacketID: packetID, Payload: payload}
			}
			first := testnode.SendPayload(newID(), "first")
			if err := c.Send(encode(100, false, first)); err != nil {
				t.Fatal(err)
			}
			answered := func() float64 {
				return publishes(t, srv, "msg", "ok") + publishes(t, srv, "any", "retransmission")
			}
			testkit.WaitFor(t, 20*time.Second, "the first publish's answer", func() bool { return answered() == 1 })
			if err := c.Send(encode(100, true, first)); err != nil { // its retransmission
				t.Fatal(err)
			}
			if err := c.Send(encode(101, false, testnode.SendPayload(newID(), "second"))); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, 20*time.Second, "the retransmission and the second publish taken", func() bool { return answered() == 3 })
			c.ResumeReading()
			testkit.WaitFor(t, 60*time.Second, "the PUBACK of the second publish", func() bool { return slices.Contains(c.AckOrder(), 101) })
			if got := c.AckOrder(); !slices.Equal(got, []uint16{100, 101}) {
				t.Fatalf("PUBACKs by packet id %v, want [100 101]: one PUBACK per publish, none for a retransmission read before its answer was written", got)
			}
			if n := countMessages(t, srv.Pool, conv.ID); n != 42 {
				t.Fatalf("%d messages stored, want 42", n)
			}
		})
	}
}

// counterValue is the sum of the counter name's series on srv.
func counterValue(t *testing.T, srv *server.Server, name string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
