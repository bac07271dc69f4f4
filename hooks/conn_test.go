package hooks

import (
	"bytes"
	"io"
	"net"
	"testing"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	chat "github.com/chatd/chatd"
)

// TestALargeWritesBufferIsNotPooled: the buffer one large publish grew
// is not handed to later writes through bufPool.
func TestALargeWritesBufferIsNotPooled(t *testing.T) {
	srv := mqtt.New(nil)
	ours, theirs := net.Pipe()
	defer ours.Close()
	defer theirs.Close()
	go func() { _, _ = io.Copy(io.Discard, theirs) }()
	cl := srv.NewClient(ours, "test", "c1", false)
	cl.Properties.ProtocolVersion = 5
	for range 10 {
		p := chat.Packet{Topic: "a/b", Payload: bytes.Repeat([]byte{'x'}, 4*maxPooledBuf), QoS: 1, PacketID: 1}
		if err := (&mqttConn{cl: cl}).Write(nil, []chat.Packet{p}); err != nil {
			t.Fatal(err)
		}
		buf := bufPool.Get().(*bytes.Buffer)
		if buf.Cap() > maxPooledBuf {
			t.Fatalf("a buffer of %d bytes came back from the pool after a large write, want at most %d", buf.Cap(), maxPooledBuf)
		}
	}
}

// TestASendsPubackIsEncodedWithoutAllocatingForItsProperties: a send's
// PUBACK, its seq, duplicate and recalled properties included, is built
// in one allocation besides the seq's digits and encoded, as mochi
// encodes it, without another.
func TestASendsPubackIsEncodedWithoutAllocatingForItsProperties(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	srv := mqtt.New(nil)
	ours, theirs := net.Pipe()
	defer ours.Close()
	defer theirs.Close()
	cl := srv.NewClient(ours, "test", "c1", false)
	cl.Properties.ProtocolVersion = 5
	res := chat.SendResult{Message: chat.Message{Seq: 123456, Recalled: true}, Duplicate: true}
	var a chat.Ack
	if n := testing.AllocsPerRun(100, func() { a = chat.Ack{PacketID: 7, Props: sendAckProps(res)} }); n > 2 {
		t.Errorf("a send's PUBACK properties: %v allocations, want at most 2", n)
	}
	want := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: 7, ProtocolVersion: 5}
	for _, kv := range []chat.KV{{Key: "seq", Val: "123456"}, {Key: "duplicate", Val: "true"}, {Key: "recalled", Val: "true"}} {
		want.Properties.User = append(want.Properties.User, packets.UserProperty{Key: kv.Key, Val: kv.Val})
	}
	var wantBuf, buf bytes.Buffer
	if err := want.PubackEncode(&wantBuf); err != nil {
		t.Fatal(err)
	}
	if err := encodeAck(&buf, &a, cl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), wantBuf.Bytes()) {
		t.Fatalf("PUBACK\n got %x\nwant %x", buf.Bytes(), wantBuf.Bytes())
	}
	if n := testing.AllocsPerRun(100, func() { buf.Reset(); _ = encodeAck(&buf, &a, cl) }); n != 0 {
		t.Errorf("encoding a PUBACK with three properties: %v allocations, want none", n)
	}
}
