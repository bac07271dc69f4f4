package client

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// reads is a connection whose reads return parts, one per Read.
type reads struct {
	net.Conn
	parts [][]byte
}

func (r *reads) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	if r.parts[0] = r.parts[0][n:]; len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	return n, nil
}

// TestTheReasonOfADisconnectIsSeenHoweverTheStreamIsCut: the connection
// follows the packets after the CONNACK by their headers; a DISCONNECT's
// reason code is found whether the packets come whole, together or a
// byte at a time, and bytes of a payload that look like a DISCONNECT are
// not taken for one.
func TestTheReasonOfADisconnectIsSeenHoweverTheStreamIsCut(t *testing.T) {
	var stream bytes.Buffer
	write := func(pk *packets.ControlPacket) {
		if _, err := pk.WriteTo(&stream); err != nil {
			t.Fatal(err)
		}
	}
	write(packets.NewControlPacket(packets.CONNACK))
	pub := packets.NewControlPacket(packets.PUBLISH)
	pub.Content.(*packets.Publish).Topic = "t"
	pub.Content.(*packets.Publish).Payload = bytes.Repeat([]byte{packets.DISCONNECT << 4, 0x01, 0x8E}, 100)
	write(pub)
	write(packets.NewControlPacket(packets.PINGRESP))
	disc := packets.NewControlPacket(packets.DISCONNECT)
	disc.Content.(*packets.Disconnect).ReasonCode = 0x8E
	write(disc)
	all := stream.Bytes()

	cuts := map[string][][]byte{"whole": {all}}
	for i := range all {
		cuts["bytewise"] = append(cuts["bytewise"], all[i:i+1])
	}
	for _, at := range []int{3, 7, len(all) - 3, len(all) - 1} {
		cuts[fmt.Sprintf("cut at %d", at)] = [][]byte{all[:at], all[at:]}
	}
	for name, parts := range cuts {
		var got []byte
		c := &connackConn{Conn: &reads{parts: slices.Clone(parts)}, told: func(time.Duration) {},
			disconnected: func(reason byte) { got = append(got, reason) }}
		if n, err := io.Copy(io.Discard, c); err != nil || n != int64(len(all)) {
			t.Fatalf("%s: read %d bytes (%v), want %d", name, n, err, len(all))
		}
		if !bytes.Equal(got, []byte{0x8E}) {
			t.Errorf("%s: reasons seen %x, want 8e once", name, got)
		}
	}
}

// TestADisconnectOtherThanATakeoverIsNotTakenForOne: a DISCONNECT
// without a reason code (remaining length 0, MQTT's "normal") reports
// 0, and a takeover's DISCONNECT that carries a reason string too
// reports 0x8E once, its properties not read as packets.
func TestADisconnectOtherThanATakeoverIsNotTakenForOne(t *testing.T) {
	var stream bytes.Buffer
	if _, err := packets.NewControlPacket(packets.CONNACK).WriteTo(&stream); err != nil {
		t.Fatal(err)
	}
	stream.Write([]byte{packets.DISCONNECT << 4, 0x00})
	disc := packets.NewControlPacket(packets.DISCONNECT)
	disc.Content.(*packets.Disconnect).ReasonCode = 0x8E
	disc.Content.(*packets.Disconnect).Properties = &packets.Properties{ReasonString: string([]byte{packets.DISCONNECT << 4, 0x01, 0x8E})}
	if _, err := disc.WriteTo(&stream); err != nil {
		t.Fatal(err)
	}
	var got []byte
	c := &connackConn{Conn: &reads{parts: [][]byte{stream.Bytes()}}, told: func(time.Duration) {},
		disconnected: func(reason byte) { got = append(got, reason) }}
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte{0x00, 0x8E}) {
		t.Fatalf("reasons seen %x, want 00 then 8e", got)
	}
}
