package hooks

import (
	"bytes"
	"io"
	"net"
	"strings"
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

// mochiAck is encodeAck through mochi's own encoder (PubackEncode), as
// chatd encoded PUBACKs before encodeAck wrote them itself: the reference
// the two tests below hold it to.
func mochiAck(buf *bytes.Buffer, a *chat.Ack, cl *mqtt.Client) error {
	pk := packets.Packet{
		FixedHeader:     packets.FixedHeader{Type: packets.Puback},
		PacketID:        a.PacketID,
		ProtocolVersion: cl.Properties.ProtocolVersion,
	}
	if pk.ProtocolVersion == 5 {
		pk.ReasonCode = a.Reason
		pk.Properties.ReasonString = a.Message
		for _, kv := range a.Props {
			pk.Properties.User = append(pk.Properties.User, packets.UserProperty{Key: kv.Key, Val: kv.Val})
		}
		pk.Mods.MaxSize = cl.Properties.Props.MaximumPacketSize
		pk.Mods.DisallowProblemInfo = cl.Properties.Props.RequestProblemInfoFlag && cl.Properties.Props.RequestProblemInfo == 0
	}
	start := buf.Len()
	for {
		if err := pk.PubackEncode(buf); err != nil {
			return err
		}
		p := &pk.Properties
		if max := pk.Mods.MaxSize; max == 0 || uint32(buf.Len()-start) <= max || (p.ReasonString == "" && p.User == nil) {
			return nil
		}
		buf.Truncate(start)
		if p.ReasonString != "" {
			p.ReasonString = ""
		} else {
			p.User = nil
		}
	}
}

// checkEncodeAck fails unless encodeAck writes what mochiAck writes for a
// client of that version, Maximum Packet Size and problem-information wish
// (0: none asked for, 1: asked for, 2: asked for none).
func checkEncodeAck(t *testing.T, a chat.Ack, version byte, maxSize uint32, problemInfo byte) {
	t.Helper()
	cl := mqtt.New(nil).NewClient(nil, "test", "c1", false)
	cl.Properties.ProtocolVersion = version
	cl.Properties.Props.MaximumPacketSize = maxSize
	if problemInfo > 0 {
		cl.Properties.Props.RequestProblemInfoFlag = true
		cl.Properties.Props.RequestProblemInfo = 2 - problemInfo
	}
	var got, want bytes.Buffer
	got.WriteString("before")
	want.WriteString("before")
	if err := mochiAck(&want, &a, cl); err != nil {
		t.Fatal(err)
	}
	if err := encodeAck(&got, &a, cl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("PUBACK %+v, v%d, max %d, problem info %d:\n got %x\nwant %x", a, version, maxSize, problemInfo, got.Bytes(), want.Bytes())
	}
}

func TestEncodeAckMatchesMochi(t *testing.T) {
	seq := []chat.KV{{Key: "seq", Val: "123456"}}
	three := []chat.KV{{Key: "seq", Val: "123456"}, {Key: "duplicate", Val: "true"}, {Key: "recalled", Val: "true"}}
	long := strings.Repeat("r", 200)
	for _, a := range []chat.Ack{
		{PacketID: 7, Props: seq},
		{PacketID: 65535, Props: three},
		{PacketID: 1},
		{PacketID: 1, Props: []chat.KV{}},
		{PacketID: 2, Reason: 0x01},
		{PacketID: 3, Reason: 0x87, Message: "not a member of this conversation"},
		{PacketID: 3, Reason: 0x97, Message: "slow down", Props: []chat.KV{{Key: "retryAfter", Val: "2"}}},
		{PacketID: 4, Reason: 0x80},
		{PacketID: 5, Reason: 0x10, Message: long, Props: three},
		{PacketID: 6, Props: []chat.KV{{Key: strings.Repeat("k", 70000), Val: ""}}},
		{PacketID: 7, Message: strings.Repeat("m", 65536)},
	} {
		// Every Maximum Packet Size up to past the largest short PUBACK:
		// each side of every limit mochi applies.
		maxes := []uint32{65536, 65541, 70007, 70008, 1 << 20}
		for m := range uint32(300) {
			maxes = append(maxes, m)
		}
		for _, v := range []byte{3, 4, 5} {
			for _, max := range maxes {
				for pi := range byte(3) {
					checkEncodeAck(t, a, v, max, pi)
				}
			}
		}
	}
}

func FuzzEncodeAck(f *testing.F) {
	f.Add(uint16(7), byte(0), "", "seq", "123456", "", "", byte(5), uint32(0), byte(0))
	f.Add(uint16(9), byte(0x87), "not allowed", "", "", "", "", byte(5), uint32(30), byte(1))
	f.Add(uint16(1), byte(0x97), "slow down", "retryAfter", "2", "x", "y", byte(5), uint32(25), byte(2))
	f.Add(uint16(1), byte(0), "", "", "", "", "", byte(4), uint32(0), byte(0))
	f.Fuzz(func(t *testing.T, id uint16, code byte, msg, k1, v1, k2, v2 string, version byte, maxSize uint32, problemInfo byte) {
		a := chat.Ack{PacketID: id, Reason: code, Message: msg}
		if k1 != "" || v1 != "" {
			a.Props = append(a.Props, chat.KV{Key: k1, Val: v1})
		}
		if k2 != "" || v2 != "" {
			a.Props = append(a.Props, chat.KV{Key: k2, Val: v2})
		}
		checkEncodeAck(t, a, version, maxSize, problemInfo%3)
	})
}
