package server_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/chatd/chatd/internal/mqtttest"
	"github.com/chatd/chatd/internal/mqttwire"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/internal/testnode"
	"github.com/chatd/chatd/server"
)

// A publish's answer leaves the connection's PUBACK order (and with it the
// Receive Maximum's count) once it is queued for the client's delivery
// session, not once it is written. A client that reads nothing while it
// floods QoS 1 publishes the server answers at once (a topic not allowed)
// made the server hold every PUBACK it could not write, unbounded, until
// the write watchdog ended the connection 30 s later: the read loop went
// on reading. Now the read loop stops reading once a Receive Maximum of
// answers waits to be written, as it does for publishes waiting for their
// answer.
func TestAClientThatReadsNoPubacksIsNotReadPastTheirBound(t *testing.T) {
	srv := startNode(t, pgtest.NewDB(t), nil)
	conn, err := net.Dial("tcp", srv.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := mqtttest.DialConn(conn, mqtttest.Options{Version: 5, ClientID: "nopuback", Password: testnode.Token(t, 1),
		Clean: true, NoAutoAck: true, ReadBuffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Drop)
	c.StopReading()

	// Chunks of publishes to a topic that is not allowed: each is
	// answered PUBACK 0x87 as soon as it is read. The packet ids wrap: a
	// client that reads nothing has no use for them.
	const perChunk, chunks = 1000, 250
	id := uint16(0)
	chunk := func() []byte {
		var b bytes.Buffer
		for range perChunk {
			id++
			if id == 0 {
				id = 1
			}
			pk, err := mqttwire.Encode(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1},
				TopicName: "chat/v1/nope", PacketID: id, Payload: []byte("x"), ProtocolVersion: 5})
			if err != nil {
				t.Fatal(err)
			}
			b.Write(pk)
		}
		return b.Bytes()
	}
	base := testkit.LiveHeap()
	denied := func() float64 { return publishes(t, srv, "denied", "forbidden") }
	written := 0
	for range chunks {
		b := chunk()
		_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write(b); err != nil {
			break // the server stopped reading
		}
		written += perChunk
	}
	// Let the server read what it is going to read.
	last := -1.0
	testkit.WaitFor(t, 60*time.Second, "the server to stop reading the flood", func() bool {
		n := denied()
		if n == last {
			return true
		}
		last = n
		time.Sleep(300 * time.Millisecond)
		return false
	})
	grew := testkit.LiveHeap() - base
	t.Logf("client wrote %d publishes, the server read %v of them, heap grew %d KiB", written, last, grew>>10)
	if grew > 8<<20 {
		t.Fatalf("a client that read none of its PUBACKs made the server hold %d MiB of them (%v publishes read)", grew>>20, last)
	}
}

// publishes is chat_mqtt_publishes_total{kind, outcome} of srv.
func publishes(t *testing.T, srv *server.Server, kind, outcome string) float64 {
	t.Helper()
	mfs, err := srv.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "chat_mqtt_publishes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
